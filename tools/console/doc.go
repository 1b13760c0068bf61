// Package console holds the end-to-end browser tests of the gateway's
// operator console (/ui): console_test.go builds the gateway and the
// fixture MCP server (./fixture), runs them on a free loopback port and
// drives the console in headless Chromium (/usr/bin/chromium) with
// chromedp. It is its own Go module, so that chromedp stays out of the
// gateway's go.mod; run it with GOWORK=off go test ./... in this folder.
package console
