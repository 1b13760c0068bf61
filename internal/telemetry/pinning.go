package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// AttrKind is what a quarantined definition defines (tool, prompt,
// resource, resource_template, instructions).
const AttrKind = attribute.Key("mcp_gateway.kind")

// PinKinds are the kinds the quarantine gauge always reports, 0 or not.
var PinKinds = []string{"tool", "prompt", "resource", "resource_template", "instructions"}

// ObservePinning registers pinning's instruments: the definitions
// quarantined now, by kind (quarantined), and the changes reported
// since start (changes: definitions that differ from the lockfile, are
// new to it, or carry suspicious text; each counted once).
func (o *Observer) ObservePinning(quarantined func() map[string]int64, changes func() int64) error {
	if !o.tel.Metering() {
		return nil
	}
	m := o.tel.Meter
	gauge, err := m.Int64ObservableGauge("mcp_gateway.quarantined_tools",
		metric.WithDescription("Definitions pinning leaves out of every view now, by kind (tool, prompt, resource, resource_template, instructions)."))
	if err != nil {
		return err
	}
	counter, err := m.Int64ObservableCounter("mcp_gateway.pin.changes",
		metric.WithDescription("Definitions reported as changed from the lockfile, new to it, or suspicious; each change once."))
	if err != nil {
		return err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		q := quarantined()
		for _, k := range PinKinds {
			obs.ObserveInt64(gauge, q[k], metric.WithAttributes(AttrKind.String(k)))
		}
		obs.ObserveInt64(counter, changes())
		return nil
	}, gauge, counter)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.regs = append(o.regs, reg)
	o.mu.Unlock()
	return nil
}
