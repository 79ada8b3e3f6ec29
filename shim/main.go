// Command kube-scheduler-pyextender is the stock kube-scheduler of
// k8s.io/kubernetes with one out-of-tree framework plugin, Pyextender, which
// forwards the extension points to the pyextender sidecar over gRPC (see
// proto/pyextender/v1/scheduler.proto). Built like scheduler-plugins builds its
// binary: app.NewSchedulerCommand(app.WithPlugin(Name, New)).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // JSON log format, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"pyextender.io/shim/plugin"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))
	os.Exit(cli.Run(command))
}
