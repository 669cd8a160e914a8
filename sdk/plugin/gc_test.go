package plugin

import (
	"runtime/debug"
	"testing"
	"time"
)

func TestSettleGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, gogc := range []string{"", "100", "50", "off", "x"} {
		if settleGC(gogc, 0) != nil {
			t.Errorf("GOGC=%q: settleGC started a timer; only a target above the default is settled", gogc)
		}
	}
	debug.SetGCPercent(400)
	if settleGC("400", time.Millisecond) == nil {
		t.Fatal("GOGC=400: no timer")
	}
	// Wait for the timer's function (bounded only so that a broken
	// settleGC fails instead of hanging).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		v := debug.SetGCPercent(400)
		if v == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after settleGC", v)
		}
	}
}
