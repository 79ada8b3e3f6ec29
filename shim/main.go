// Command kube-scheduler-pyextender is the stock kube-scheduler of
// k8s.io/kubernetes with one out-of-tree framework plugin, Pyextender, which
// forwards the extension points to the pyextender sidecar over gRPC (see
// proto/pyextender/v1/scheduler.proto). Built like scheduler-plugins builds its
// binary: app.NewSchedulerCommand(app.WithPlugin(Name, New)).
package main

import (
	"os"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // JSON log format, as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"

	"pyextender.io/shim/plugin"
)

func main() {
	// A different default from upstream, on purpose: with
	// NominatedNodeNameForExpectation (beta and on since 1.35) kube-scheduler
	// PATCHes pods/status of every pod that waits in Permit, and a gang holds
	// every member but its last there, so each member would cost one more API
	// write than a plain pod. --feature-gates=NominatedNodeNameForExpectation=true
	// turns it back on (flags are parsed after this).
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(features.NominatedNodeNameForExpectation): false,
	}); err != nil {
		panic(err)
	}
	command := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))
	os.Exit(cli.Run(command))
}
