// CoreDNS for ArkGPU's real-node tests (the cluster's DNS: the chart's kube-scheduler
// reaches the extender by its Service name), with the plugins the test cluster's Corefile
// uses (tests/e2e/manifests/coredns.yaml): the upstream server, built as a module.
// Built by scripts/build-node.sh; never part of the product.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins' order in a server block (CoreDNS's plugin.cfg order, these plugins only).
func init() {
	dnsserver.Directives = []string{"errors", "health", "ready", "kubernetes", "cache"}
}

func main() { coremain.Run() }
