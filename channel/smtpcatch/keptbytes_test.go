package smtpcatch_test

import (
	"fmt"
	"net/smtp"
	"runtime"
	"strings"
	"testing"

	"github.com/inboxgw/gateway/channel/smtpcatch"
)

// TestKeptBytesBounded: the kept messages hold at most MaxKeptBytes in all, whatever the
// messages' sizes, so a client sending many large messages with both a text and an HTML
// part (each kept raw and decoded) cannot make the dev catcher hold MaxMessages times
// twice MaxMessageBytes (385 MiB measured with the defaults). The newest message is
// always kept, the count bound still holds for small messages, and Received counts all.
func TestKeptBytesBounded(t *testing.T) {
	part := func(kib int) string { return strings.Repeat(strings.Repeat("x", 1022)+"\r\n", kib) }
	msg := func(i, kib int) string {
		return fmt.Sprintf("Subject: m%d\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n"+
			"--B\r\nContent-Type: text/plain\r\n\r\n%s\r\n--B\r\nContent-Type: text/html\r\n\r\n%s\r\n--B--\r\n", i, part(kib), part(kib))
	}
	for _, tc := range []struct {
		name      string
		cfg       smtpcatch.Config
		n, kib    int   // messages sent, KiB of each of their two parts
		maxKept   int64 // bytes
		wantCount int   // messages kept, when known
	}{
		{name: "defaults, large messages", n: 40, kib: 480, maxKept: smtpcatch.DefaultMaxKeptBytes},
		{name: "small budget", cfg: smtpcatch.Config{MaxKeptBytes: 1 << 20}, n: 20, kib: 100, maxKept: 1 << 20},
		{name: "one message over the budget is kept", cfg: smtpcatch.Config{MaxKeptBytes: 1 << 10}, n: 3, kib: 8, maxKept: 1 << 20, wantCount: 1},
		{name: "count bound first", cfg: smtpcatch.Config{MaxMessages: 5}, n: 12, kib: 1, maxKept: smtpcatch.DefaultMaxKeptBytes, wantCount: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := smtpcatch.New(tc.cfg)
			if err := c.Listen("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			for i := range tc.n {
				if err := smtp.SendMail(c.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte(msg(i, tc.kib))); err != nil {
					t.Fatal(i, err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			retained := int64(ms.HeapAlloc) - int64(before)
			kept := c.Messages()
			var held int64
			for _, m := range kept {
				held += int64(len(m.Raw) + len(m.Text) + len(m.HTML))
			}
			if len(kept) == 0 || kept[len(kept)-1].Subject != fmt.Sprint("m", tc.n-1) {
				t.Fatalf("the newest message is not kept (%d kept)", len(kept))
			}
			if held > tc.maxKept || retained > 2*tc.maxKept+8<<20 {
				t.Fatalf("%d messages kept hold %d bytes (heap +%d MiB), bound %d", len(kept), held, retained>>20, tc.maxKept)
			}
			if tc.wantCount > 0 && len(kept) != tc.wantCount {
				t.Fatalf("%d kept, want %d", len(kept), tc.wantCount)
			}
			if c.Received() != uint64(tc.n) {
				t.Fatalf("received %d, want %d", c.Received(), tc.n)
			}
			t.Logf("%d of %d kept, %d KiB, heap +%d MiB", len(kept), tc.n, held>>10, retained>>20)
		})
	}
}
