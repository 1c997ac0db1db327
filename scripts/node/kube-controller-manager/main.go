// kube-controller-manager for ArkGPU's real-node tests (service accounts, the
// not-ready taint, Deployments and DaemonSets turned into pods): the upstream
// command, built as a module. Built by scripts/build-node.sh; never part of the product.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
