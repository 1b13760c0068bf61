package router

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// TestHostGate: calls of one host run together; another host's calls
// wait for them, and once one waits, the holder starts no new calls, so
// that nobody waits forever. A waiter whose context ends gives up.
func TestHostGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g hostGate
		ctx := context.Background()
		for range 2 {
			if err := g.enter(ctx, "A"); err != nil {
				t.Fatal(err)
			}
		}
		var order []string
		entered := func(key string) chan struct{} {
			done := make(chan struct{})
			go func() {
				if err := g.enter(ctx, key); err != nil {
					t.Errorf("%s: %v", key, err)
				}
				order = append(order, key)
				close(done)
			}()
			return done
		}
		b := entered("B")
		synctest.Wait()
		a3 := entered("A") // A may not jump ahead of the waiting B
		synctest.Wait()
		if len(order) != 0 {
			t.Fatalf("entered while A held the gate: %v", order)
		}
		g.leave()
		synctest.Wait()
		if len(order) != 0 {
			t.Fatalf("entered while A still had a call: %v", order)
		}
		g.leave()
		<-b
		synctest.Wait()
		if len(order) != 1 || order[0] != "B" {
			t.Fatalf("order %v, want B first", order)
		}
		cctx, cancel := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		go func() { gaveUp <- g.enter(cctx, "C") }()
		synctest.Wait()
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled waiter: %v", err)
		}
		g.leave() // B's
		<-a3
		g.leave()
		if g.n != 0 || len(g.queue) != 0 || g.holder != "" {
			t.Errorf("gate not empty: holder %q, %d calls, %d waiting", g.holder, g.n, len(g.queue))
		}
	})
}
