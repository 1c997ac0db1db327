// etcd for ArkGPU's end-to-end tests: the upstream server's entry point, built as a module.
// Built by scripts/build-control-plane.sh; never part of the product.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
