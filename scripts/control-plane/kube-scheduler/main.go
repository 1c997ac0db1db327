// kube-scheduler for ArkGPU's end-to-end tests: the upstream command, built as a module.
// Built by scripts/build-control-plane.sh; never part of the product.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
