package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
)

// Outside dev mode a demo import (INBOX_DEMO_IMPORT) mints no token: the gateway used to
// sign a 30-day notifications:send token with the production secret and print it to
// stderr (the log stream) as "pre-filled in GraphiQL", which it is not outside dev mode.
func TestDemoImportPrintsNoTokenOutsideDev(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a gateway process")
	}
	env := gwEnv(t, dynlocaltest.TableName(t), "INBOX_DEMO_IMPORT="+smallDemoImport(t))
	p, s := startGatewayProc(t, "gateway", env)
	p.waitLog("demo user", time.Time{}, procTimeout)
	// The banner is written before the server accepts: once /healthz answers it is in the
	// pipe. The gateway is then stopped: once it has exited its reader has taken every
	// line it wrote (kill waits for that), with no wall-clock guess.
	resp, err := http.Get(strings.TrimSuffix(s.URL, "/graphql") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p.kill(syscall.SIGTERM)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.logs {
		if strings.Contains(l.raw, "Bearer ") || strings.Contains(l.raw, "Demo token") {
			t.Errorf("a production gateway printed a demo token: %s", l.raw)
		}
	}
}

// smallDemoImport writes the first three events of the GitHub webhook examples (all their
// real payloads) to a file and returns its path: what the import does with each is the
// same, and the whole file (58 events) took the import about 20 s on DynamoDB Local.
func smallDemoImport(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("node_modules/@octokit/webhooks-examples/api.github.com/index.json")
	if err != nil {
		t.Fatal(err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatal(err)
	}
	small, err := json.Marshal(events[:3])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "index.json")
	if err := os.WriteFile(path, small, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
