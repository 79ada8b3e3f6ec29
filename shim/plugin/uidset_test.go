package plugin

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestABoundedSetStartsAfreshWhenFullAndAnUnboundedOneNever(t *testing.T) {
	bounded := uidSet{max: 2}
	bounded.add("a", "b")
	bounded.add("c") // past max: the memory starts afresh with c
	if bounded.has("a") || bounded.has("b") || !bounded.has("c") || bounded.len() != 1 {
		t.Fatalf("bounded set after a third add: a=%v b=%v c=%v len=%d",
			bounded.has("a"), bounded.has("b"), bounded.has("c"), bounded.len())
	}
	var open uidSet
	for i := 0; i < 5000; i++ {
		open.add(types.UID(rune('a'+i%26)) + types.UID(string(rune(i))))
	}
	if open.len() != 5000 {
		t.Fatalf("unbounded set holds %d of 5000", open.len())
	}
	open.remove(types.UID("a") + types.UID(string(rune(0))))
	if open.len() != 4999 {
		t.Fatalf("remove left %d", open.len())
	}
}
