// kube-proxy for ArkGPU's real-node tests (Services: the API server's 10.96.0.1 for the
// chart's pods, the webhook's and the extender's ClusterIPs): the upstream command,
// built as a module. Built by scripts/build-node.sh; never part of the product.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
