package telemetry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestLoggedDurationsReadable: a duration is logged as "2.5s", in groups
// too, not as nanoseconds.
func TestLoggedDurationsReadable(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, slog.LevelInfo).Info("upstream down: restarting", "retry_in", 2500*time.Millisecond,
		slog.Group("g", "d", time.Minute), "n", 3)
	var got struct {
		RetryIn any `json:"retry_in"`
		G       struct {
			D any `json:"d"`
		} `json:"g"`
		N any `json:"n"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.RetryIn != "2.5s" || got.G.D != "1m0s" || got.N != float64(3) {
		t.Errorf("logged %s, want retry_in \"2.5s\", g.d \"1m0s\" and n 3", buf.Bytes())
	}
}
