package upstream

import "time"

// SetStopGrace shortens how long Close waits for a stdio child after
// closing its stdin and after SIGTERM. Call it before Start.
func SetStopGrace(c *Client, d time.Duration) { c.stopGrace = d }
