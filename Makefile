# Runbook — build, test and run the operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(shell pwd)
BIN := $(ROOT)/bin
K8S_BIN := $(BIN)/k8s
export PATH := $(K8S_BIN):$(BIN):$(PATH)

## Pinned tool versions (they must build with Go 1.26.8).
CONTROLLER_GEN_VERSION ?= v0.23.0
# prometheus-operator whose ServiceMonitor CRD the tests validate against.
PROMETHEUS_OPERATOR_VERSION ?= v0.95.2
# KEDA whose ScaledObject CRD the NSScaler tests pause and unpause.
KEDA_VERSION ?= v2.21.0
# Flux and Argo CD API modules of the GitOps test fixtures (newer ones need Go 1.27).
FLUX_KUSTOMIZE_API_VERSION ?= v1.9.6
FLUX_HELM_API_VERSION ?= v1.6.5
ARGOCD_VERSION ?= v3.5.0
# Argo Rollouts whose Rollout CRD the RebootPolicy tests restart (v1.10.2 needs
# a newer Go than the project's).
ARGO_ROLLOUTS_VERSION ?= v1.10.1
# cert-manager whose Certificate CRD the Memcached tests issue against (tls.issuerRef).
CERT_MANAGER_VERSION ?= v1.21.2
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
# krew, whose validator and installer test the kubectl-runbook plugin's manifest.
KREW_VERSION ?= v0.4.3

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)
KREW := $(BIN)/krew-$(KREW_VERSION)
VALIDATE_KREW_MANIFEST := $(BIN)/validate-krew-manifest-$(KREW_VERSION)

# The manager image: `make image` builds it, `make deploy`/`build-installer`
# and the Helm chart (values.yaml, appVersion) default to it.
IMAGE_REPO ?= ghcr.io/runbook-dev/runbook-manager
IMAGE_TAG ?= v0.1.0
IMG ?= $(IMAGE_REPO):$(IMAGE_TAG)
GO_TEST_FLAGS ?= -timeout 80m -count=1
GO_TEST_PACKAGES ?= ./...

.PHONY: all
all: build

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the controller-gen markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./internal/..." output:crd:artifacts:config=config/crd/bases
	@$(MAKE) -s --no-print-directory helm-crds

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt
	go fmt ./...

.PHONY: vet
vet: ## go vet
	go vet ./...

.PHONY: lint
# --allow-serial-runners: a second lint on the machine (another checkout's
# CI) waits for the first instead of failing.
lint: $(GOLANGCI_LINT) ## Run golangci-lint (the root module and the nested ones).
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	@set -e; for m in $(NESTED_MODULES); do (cd $$m && $(GOLANGCI_LINT) run --allow-serial-runners ./...); done

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated code or manifests are stale.
	@git diff --exit-code -- api config charts/runbook/crds charts/runbook/files || { echo "Generated files are stale: run 'make manifests generate' and commit the result." >&2; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api config charts/runbook/crds charts/runbook/files); \
	  if [ -n "$$untracked" ]; then echo "Generated files not committed: $$untracked" >&2; exit 1; fi
	@set -e; for m in . $(NESTED_MODULES); do (cd $$m && go mod tidy -diff >/dev/null) || { echo "$$m: go.mod/go.sum are not tidy: run 'go mod tidy' in $$m and commit the result." >&2; exit 1; }; done

.PHONY: k8s-binaries
k8s-binaries: ## Build etcd, kube-apiserver, controller-manager, scheduler, kubectl and kwok into bin/k8s (once).
	@bash hack/build-k8s.sh

.PHONY: node-binaries
node-binaries: ## Build the real node's kubelet, kube-proxy, containerd and crictl into bin/node (once); runc and CNI plugins from Debian.
	@bash hack/build-node.sh

.PHONY: test
test: manifests generate k8s-binaries node-binaries node-images $(KUSTOMIZE) $(HELM) $(KREW) $(VALIDATE_KREW_MANIFEST) ## Unit, integration (envtest) and end-to-end (kwok cluster, real node) tests.
	@bash hack/check-prereqs.sh
	go test $(GO_TEST_FLAGS) $(GO_TEST_PACKAGES)
	$(if $(filter ./...,$(GO_TEST_PACKAGES)),@$(MAKE) -s --no-print-directory test-modules)

# Modules of their own (heavy dependency graphs kept out of go.mod): the image
# builder and the alert/dashboard tests. `go test ./...` at the root skips them.
NESTED_MODULES := hack/image test/monitoring

.PHONY: test-modules
test-modules: ## Tests of the nested modules (hack/image, test/monitoring); `make test` runs them too.
	@set -e; for m in $(NESTED_MODULES); do echo "==> go test ./... in $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...); done

.PHONY: test-unit
test-unit: ## Only tests that need no apiserver or cluster; says which suites and tests it skipped.
	go test -count=1 -short -v ./... | grep -E '^(ok|FAIL|--- FAIL|--- SKIP|SKIP|panic)'


.PHONY: bench
bench: manifests k8s-binaries ## Benchmarks on the local control plane (speed and memory targets).
	go test -run '^$$' -bench . -benchtime 1x -timeout 150m -p 1 ./test/bench/...

##@ Build and run

.PHONY: build
build: manifests generate ## Build the manager binary into bin/manager (static, trimmed and stripped: the image's flags).
	CGO_ENABLED=0 go build $(STATIC_BUILD_FLAGS) -o $(BIN)/manager ./cmd

.PHONY: run
run: manifests generate ## Run the manager against the cluster of the current KUBECONFIG.
	go run ./cmd --health-probe-bind-address=:8081

.PHONY: demo
demo: manifests generate k8s-binaries ## Bring up a local simulated cluster (with a real node when the machine can run one), run Runbook in it; Ctrl-C tears it down.
	@bash hack/build-node.sh || echo "==> the real node's binaries could not be built here (above): the demo runs on kwok nodes only"
	@$(MAKE) -s --no-print-directory node-images || echo "==> the real node's images could not be built here (above): the demo runs on kwok nodes only"
	go build -o $(BIN)/runbook-demo ./hack/demo
	$(BIN)/runbook-demo $(DEMO_FLAGS)

##@ Tools (installed into bin/, never assumed on PATH)

$(CONTROLLER_GEN):
	$(call go-install-tool,$@,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_GEN_VERSION))
$(KUSTOMIZE):
	$(call go-install-tool,$@,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))
$(GOLANGCI_LINT):
	$(call go-install-tool,$@,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))
$(HELM):
	$(call go-install-tool,$@,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))
$(KREW):
	$(call go-install-tool,$@,sigs.k8s.io/krew/cmd/krew,$(KREW_VERSION))
$(VALIDATE_KREW_MANIFEST):
	$(call go-install-tool,$@,sigs.k8s.io/krew/cmd/validate-krew-manifest,$(KREW_VERSION))

.PHONY: tools
tools: $(CONTROLLER_GEN) $(KUSTOMIZE) $(GOLANGCI_LINT) $(HELM) $(KREW) $(VALIDATE_KREW_MANIFEST) ## Install the pinned tools.

# go-install-tool installs package $2@$3 as the versioned binary $1, so a
# version bump in this file installs the new tool instead of reusing the old.
define go-install-tool
@[ -f "$(1)" ] || { \
  set -e; echo "==> installing $(2)@$(3) into bin/"; \
  GOBIN=$(BIN) GOFLAGS= go install $(2)@$(3); \
  mv "$(BIN)/$$(basename $(2) | sed 's/^v[0-9]*$$/kustomize/')" "$(1)"; \
}
endef

##@ Install and deploy (to the cluster of the current KUBECONFIG)

KUBECTL ?= $(K8S_BIN)/kubectl
CONTAINER_TOOL ?= docker
DIST_DIR ?= dist
ignore-not-found ?= false

# render-default prints config/default with the manager image set to $(IMG).
# It edits a temporary copy of config/, so the committed kustomization never
# changes; the copy is removed when the recipe's shell exits.
define render-default
tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -r config "$$tmp/" && (cd "$$tmp/config/manager" && $(KUSTOMIZE) edit set image controller=$(IMG)) && $(KUSTOMIZE) build "$$tmp/config/default"
endef

.PHONY: install
install: manifests $(KUSTOMIZE) ## Install the CRDs (server-side apply).
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests $(KUSTOMIZE) ## Remove the CRDs (and every custom resource!). ignore-not-found=true to ignore absent ones.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Deploy config/default (namespace runbook-system) with the manager image $(IMG).
	$(render-default) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove everything deploy created. ignore-not-found=true to ignore absent objects.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: CRDs, RBAC and the manager (image $(IMG)) in one file.
	@mkdir -p $(DIST_DIR)
	$(render-default) > $(DIST_DIR)/install.yaml
	@echo "wrote $(DIST_DIR)/install.yaml (image $(IMG)); install with: kubectl apply --server-side -f $(DIST_DIR)/install.yaml"

.PHONY: docker-build
docker-build: ## Build the manager image $(IMG) (needs a Docker engine; there is none on the project's machines).
	@$(CONTAINER_TOOL) info >/dev/null 2>&1 || { echo "no working $(CONTAINER_TOOL) engine here: building the image needs one. 'make build-static' builds the same static binary without it." >&2; exit 1; }
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image $(IMG).
	$(CONTAINER_TOOL) push $(IMG)

# The flags of every manager build: `make build`, `make build-static` and each
# binary of `make image`. grpcnotrace drops grpc's golang.org/x/net/trace (never
# enabled): its html/template keeps every exported method of every type alive
# in the linker: a large share of the binary and of its resident memory.
STATIC_BUILD_FLAGS := -trimpath -tags grpcnotrace -ldflags="-s -w"

.PHONY: build-static
build-static: ## Build the static manager binary (CGO disabled, as in the image) into bin/manager-static.
	CGO_ENABLED=0 go build $(STATIC_BUILD_FLAGS) -o $(BIN)/manager-static ./cmd

IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_DIR ?= $(BIN)/image
PUSH ?= false
# Reproducible: the image's times are the last commit's.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)

.PHONY: image
image: ## Build the manager's OCI image $(IMG) for $(IMAGE_PLATFORMS) without a container engine into $(IMAGE_DIR) (OCI layout oci/ and runbook-manager.oci.tar); PUSH=true pushes it to $(IMG).
	@mkdir -p $(abspath $(IMAGE_DIR))
	@set -e; bins=; for p in $(IMAGE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
	  echo "==> CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(STATIC_BUILD_FLAGS) ./cmd"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(STATIC_BUILD_FLAGS) -o $(abspath $(IMAGE_DIR))/manager-$$os-$$arch ./cmd; \
	  bins="$$bins -binary $$p=$(abspath $(IMAGE_DIR))/manager-$$os-$$arch"; \
	done; \
	push=; [ "$(PUSH)" = true ] && push=-push; \
	cd hack/image && go run . -name "$(IMG)" -out "$(abspath $(IMAGE_DIR))" -created "$(SOURCE_DATE_EPOCH)" -revision "$(REVISION)" -build-flags '$(STATIC_BUILD_FLAGS)' $$push $$bins

# The images of the local real node (docs/install.md#images-for-a-node-without-a-registry):
# no registry, so they are imported into its containerd from OCI archives.
NODE_IMAGES_DIR ?= $(BIN)/node-images
NODE_IMAGE_REPO ?= runbook.local
NODE_IMAGE_TAG ?= $(IMAGE_TAG)

.PHONY: node-images
node-images: ## Build the real node's images (pause, manager, memcached from Debian's package, web, memcached-tls-agent) for this machine's platform into $(NODE_IMAGES_DIR): one OCI archive each and images.json with the references pods use.
	@set -e; out=$(abspath $(NODE_IMAGES_DIR)); arch=$$(go env GOARCH); mkdir -p $$out/bin; \
	CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build $(STATIC_BUILD_FLAGS) -o $$out/bin/manager ./cmd; \
	CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build $(STATIC_BUILD_FLAGS) -o $$out/bin/memcached-tls-agent ./cmd/memcached-tls-agent; \
	cd hack/image; \
	for p in web pause; do CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build $(STATIC_BUILD_FLAGS) -o $$out/bin/$$p ./$$p; done; \
	go run . node-images -out $$out -repo "$(NODE_IMAGE_REPO)" -tag "$(NODE_IMAGE_TAG)" -created "$(SOURCE_DATE_EPOCH)" -revision "$(REVISION)" \
	  -static-created "$$(git log -1 --format=%ct -- . 2>/dev/null || echo 0)" -build-flags '$(STATIC_BUILD_FLAGS)' \
	  -manager linux/$$arch=$$out/bin/manager -web linux/$$arch=$$out/bin/web -pause linux/$$arch=$$out/bin/pause \
	  -tls-agent linux/$$arch=$$out/bin/memcached-tls-agent

##@ kubectl plugin (cmd/kubectl-runbook, docs/plugin.md)

PLUGIN_VERSION ?= $(IMAGE_TAG)
PLUGIN_DIST_DIR ?= $(DIST_DIR)/plugin
# Empty: every platform of hack/krew/runbook.yaml (a release). A subset
# ("linux/amd64") builds those archives and a manifest that lists only them.
PLUGIN_PLATFORMS ?=

.PHONY: plugin
plugin: ## Build the kubectl-runbook plugin into bin/ (put bin/ on PATH: `kubectl runbook status -A`).
	go build -o $(BIN)/kubectl-runbook ./cmd/kubectl-runbook

.PHONY: plugin-dist
plugin-dist: ## Build the plugin's release archives and its krew manifest (hack/krew/runbook.yaml) into $(PLUGIN_DIST_DIR).
	PLATFORMS="$(PLUGIN_PLATFORMS)" hack/krew/dist.sh $(PLUGIN_VERSION) $(PLUGIN_DIST_DIR)

##@ Helm chart (charts/runbook)

.PHONY: helm-crds
helm-crds: ## Copy the generated CRDs and manager ClusterRole into the chart (`make manifests` does it too).
	@mkdir -p charts/runbook/crds charts/runbook/files
	@rm -f charts/runbook/crds/*.yaml
	@cp config/crd/bases/*.yaml charts/runbook/crds/
	@cp config/rbac/role.yaml charts/runbook/files/manager-role.yaml
	@cp config/prometheus/prometheusrule.yaml charts/runbook/files/prometheusrule.yaml
	@mkdir -p charts/runbook/files/dashboards && rm -f charts/runbook/files/dashboards/*.json && cp config/grafana/dashboards/*.json charts/runbook/files/dashboards/

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the chart.
	$(HELM) lint --strict charts/runbook

.PHONY: helm-template
helm-template: $(HELM) ## Render the chart with its default values.
	$(HELM) template runbook charts/runbook --namespace runbook-system

.PHONY: docs-rbac
.PHONY: servicemonitor-crd
servicemonitor-crd: $(CONTROLLER_GEN) ## Regenerate the ServiceMonitor CRD test fixture from prometheus-operator's API types.
	hack/prometheus-operator-crds.sh $(PROMETHEUS_OPERATOR_VERSION) $(CONTROLLER_GEN) servicemonitors

.PHONY: prometheusrule-crd
prometheusrule-crd: $(CONTROLLER_GEN) ## Regenerate the PrometheusRule CRD test fixture from prometheus-operator's API types.
	hack/prometheus-operator-crds.sh $(PROMETHEUS_OPERATOR_VERSION) $(CONTROLLER_GEN) prometheusrules

.PHONY: dashboards
dashboards: ## Write the Grafana dashboards (test/monitoring/dashboards) into config/grafana/dashboards and the chart.
	cd test/monitoring && go run ./cmd/dashboards $(ROOT)/config/grafana/dashboards
	@$(MAKE) -s --no-print-directory helm-crds

.PHONY: argo-rollouts-crd
argo-rollouts-crd: $(CONTROLLER_GEN) ## Regenerate the Argo Rollouts Rollout CRD test fixture from Argo Rollouts' API types.
	hack/argo-rollouts-crd.sh $(ARGO_ROLLOUTS_VERSION) $(CONTROLLER_GEN)

.PHONY: keda-crd
keda-crd: $(CONTROLLER_GEN) ## Regenerate the KEDA ScaledObject CRD test fixture from KEDA's API types.
	hack/keda-crd.sh $(KEDA_VERSION) $(CONTROLLER_GEN)

.PHONY: cert-manager-crd
cert-manager-crd: $(CONTROLLER_GEN) ## Regenerate the cert-manager Certificate CRD test fixture from cert-manager's API types.
	hack/cert-manager-crd.sh $(CERT_MANAGER_VERSION) $(CONTROLLER_GEN)

.PHONY: gitops-crds
gitops-crds: $(CONTROLLER_GEN) ## Regenerate the Flux Kustomization/HelmRelease CRD test fixtures from Flux's API types, and copy Argo CD's Application CRD.
	hack/flux-crds.sh $(FLUX_KUSTOMIZE_API_VERSION) $(FLUX_HELM_API_VERSION) $(CONTROLLER_GEN)
	hack/argocd-crd.sh $(ARGOCD_VERSION)

docs-rbac: manifests ## Rewrite the RBAC rules table of docs/security.md from config/rbac/role.yaml.
	UPDATE_RBAC_DOC=1 go test -count=1 -run TestSecurityDocListsTheRBACRules ./test/install/
