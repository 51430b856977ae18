package store

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Scheduled work of the inbox states: a snooze's wake-up and a notification's expiry are
// tasks written in the same transaction as the state they serve, and run by the durable
// scheduler, which calls Wake or Expire with the task's token. This file is the one
// place that writes them (taskAction), so that it can be pointed at the scheduler's own
// API (store.ScheduleAction of package sched's queue) without touching the writers.

// Task kinds of the inbox states.
const (
	// TaskWake wakes a snoozed notification (Wake); its token is snoozedUntil in ms.
	TaskWake = "inbox.wake"
	// TaskExpire expires a notification (Expire); its token is expireAt in ms.
	TaskExpire = "inbox.expire"
)

// stateTaskItem is a scheduled task as written here: pk "TASK#" + the due minute (UTC,
// yyyymmddhhmm), sk the due time in ms (13 digits) + kind + viewer + notification id, so
// the tasks of one minute are one Query in due order.
type stateTaskItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	Kind       string `dynamodbav:"kind"`
	Due        int64  `dynamodbav:"due"`
	Tenant     string `dynamodbav:"tenant"`
	User       string `dynamodbav:"user"`
	Ref        string `dynamodbav:"ref"`
	Token      string `dynamodbav:"token"`
}

// taskAction returns the Put of the task kind for v's notification id, due at due with
// token, and the key it writes (for txn). The Put is unconditional: a retried
// transaction writes the same item again.
func (s *Store) taskAction(kind string, v inbox.Viewer, id string, due time.Time, token string) (itemKey, types.TransactWriteItem) {
	due = due.UTC()
	k := itemKey{"TASK#" + due.Format("200601021504"),
		fmt.Sprintf("%013d#%s#%s#%s#%s", due.UnixMilli(), kind, v.TenantID, v.UserID, id)}
	item, err := attributevalue.MarshalMap(stateTaskItem{PK: k.pk, SK: k.sk, EntityType: "ScheduledTask", Kind: kind,
		Due: due.UnixMilli(), Tenant: v.TenantID, User: v.UserID, Ref: id, Token: token})
	if err != nil {
		// A struct of strings and integers always marshals.
		panic(fmt.Sprintf("store: marshal task: %v", err))
	}
	return k, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item}}
}
