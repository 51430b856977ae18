package inbox_test

import (
	"go/build"
	"strings"
	"testing"
)

// The domain's packages speak package inbox's vocabulary, never the DynamoDB adapter's
// (DESIGN.md "The shape (v3)"): the send service, the scheduler and the delivery worker
// take narrow interfaces that *store.Store implements, and none of them (nor this
// package) imports store or the AWS SDK in non-test code.
func TestDomainImportsNoStore(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../service", "../sched", "../delivery", "../routing"} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			// The scheduler holds its leases on the table itself (package lease, the
			// DynamoDB client): it alone may name the SDK's types.
			sdk := strings.HasPrefix(imp, "github.com/aws/aws-sdk-go-v2/") && dir != "../sched"
			if imp == "github.com/inboxgw/gateway/store" || sdk {
				t.Errorf("%s imports %s", pkg.ImportPath, imp)
			}
		}
	}
}
