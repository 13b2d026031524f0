#!/bin/sh
# Demo exec probe for config/samples/autoreboot_v1alpha1_rebootpolicy_exec.yaml:
# the demo manager runs with --exec-probe-dir=hack/demo/probes, so this is the
# only script that sample may run. Exit 0 = healthy; make it `exit 1` to see
# the RebootPolicy restart nginx.
exit 0
