package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/dynlocal/dynlocaltest"
	"github.com/inboxgw/gateway/internal/testgw"
)

// without returns env without the variable name.
func without(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// The worker and import-github read no token: they start without INBOX_JWT_SECRET (and
// without INBOX_CURSOR_SECRET or INBOX_JWKS_URL), the worker runs what a gateway
// without a scheduler accepted (a send at sendAt), and import-github imports. An
// import-github that cannot reach the store stops with an error (exit status 1).
func TestWorkerAndImportNeedNoJWTSecret(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	env := gwEnv(t, dynlocaltest.TableName(t))
	_, s := startGatewayProc(t, "gateway", env) // INBOX_SCHEDULER=false: sends at sendAt wait for a scheduler
	noSecret := without(env, "INBOX_JWT_SECRET")

	// import-github without a secret.
	imp := exec.Command(buildGateway(t), "import-github", smallDemoImport(t), "--tenant", "imported")
	imp.Env = noSecret
	if out, err := imp.CombinedOutput(); err != nil || !strings.Contains(string(out), "notifications: ") {
		t.Fatalf("import-github without INBOX_JWT_SECRET: %v\n%s", err, out)
	}

	// A send at sendAt through the gateway, run by a worker without a secret.
	base := strings.TrimSuffix(s.URL, "/graphql")
	svc := s.ServiceToken("acme", "svc")
	body, _ := json.Marshal(map[string]any{"recipientUserId": "alice", "type": "otp", "title": "later",
		"sendAt": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/notifications", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+svc)
	req.Header.Set("Idempotency-Key", "later-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("send at sendAt: %d", resp.StatusCode)
	}
	w := startProc(t, "worker", append(noSecret, "INBOX_SCHED_POLL=200ms"), "worker")
	w.waitLog("scheduler: starting", time.Time{}, procTimeout)
	alice := s.Token("acme", "alice")
	testgw.WaitFor(t, 60*time.Second, "the worker to write the send at sendAt", func() bool { return len(s.InboxIDs(alice)) == 1 })

	// import-github with the store out of reach: an error, exit status 1.
	down := exec.Command(buildGateway(t), "import-github", smallDemoImport(t), "--tenant", "down")
	down.Env = append(without(noSecret, "AWS_ENDPOINT_URL_DYNAMODB"), "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1")
	out, err := down.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "inbox-gateway: ") || strings.Contains(string(out), "panic") {
		t.Fatalf("import-github with the store out of reach: %v\n%s", err, out)
	}
}
