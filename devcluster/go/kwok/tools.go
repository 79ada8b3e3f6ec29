//go:build tools

// Package tools pins the upstream command this module builds.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
