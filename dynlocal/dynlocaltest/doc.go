// Package dynlocaltest gives tests a DynamoDB client backed by DynamoDB Local.
//
// Every test binary shares one engine: the one named by
// INBOX_TEST_DYNAMODB_ENDPOINT, or else one in-memory instance started on first use
// and killed by the kernel when the test binary exits (make test: one per binary).
// Tables created through its clients have no stream unless the test calls
// KeepStreams (streams.go says why). Tests isolate themselves with TableName, which
// gives each test its own table name:
//
//	func TestSomething(t *testing.T) {
//		client := dynlocaltest.Client(t)
//		table := dynlocaltest.TableName(t)
//		// create table, run the code under test ...
//	}
//
// When the engine cannot be started (no Java, no jar) the test fails with a
// message saying what to install; it is never skipped.
package dynlocaltest
