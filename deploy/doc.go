// Package deploy holds what runs the gateway on AWS: cloudformation.yaml, the source of
// truth for the DynamoDB table (keys, every index and projection, TTL attribute, stream),
// the gateway's least-privilege managed policy, a separate one for table management, and
// the alarms on throttling, system errors and a stalled stream relay.
//
// The package has no Go code besides its tests, which keep the template honest: the table
// it declares is the one store.CreateTable creates on DynamoDB Local, and the policies
// grant exactly the DynamoDB actions the gateway's code calls (derived from its source),
// never Scan. cfn-lint checks the template in make test.
package deploy
