package cluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteTokenKubeconfig writes a kubeconfig with the admin kubeconfig's
// server and CA and a bearer token as the only credential: the manager
// binary then runs as a ServiceAccount, under its RBAC.
func WriteTokenKubeconfig(admin, out, token string) error {
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return err
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil {
		return fmt.Errorf("%s has no current context", admin)
	}
	src := cfg.Clusters[cur.Cluster]
	if src == nil {
		return fmt.Errorf("%s has no cluster %q", admin, cur.Cluster)
	}
	ca := src.CertificateAuthorityData
	if len(ca) == 0 && src.CertificateAuthority != "" {
		if ca, err = os.ReadFile(src.CertificateAuthority); err != nil {
			return err
		}
	}
	sa := clientcmdapi.NewConfig()
	sa.Clusters["cluster"] = &clientcmdapi.Cluster{Server: src.Server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: len(ca) == 0 && src.InsecureSkipTLSVerify}
	sa.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: token}
	sa.Contexts["manager"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "manager"}
	sa.CurrentContext = "manager"
	return clientcmd.WriteToFile(*sa, out)
}
