package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Bringing a deployed table up to this version (CreateTable on a table that exists):
// the indexes it reads, the stream the relay reads, TTL on expiresAt.
//
// DynamoDB creates an index added to a table that holds data by backfilling it, which on
// AWS takes minutes to hours for a large table; DynamoDB refuses Queries on an index that
// is not ACTIVE, so CreateTable waits for ACTIVE, bounded by the caller's deadline or
// indexWaitLimit. On DynamoDB Local the backfill runs on the engine's background
// executor, which it shares with the TTL sweeps of every table with TTL enabled: with a
// few hundred such tables (a test run that never drops its tables), an added index was
// seen to stay CREATING, without even starting to backfill, for more than a minute,
// though alone it is ACTIVE within a second.

// indexWaitLimit bounds the wait for added indexes when the caller's context has no
// deadline: a gateway that cannot serve its reads yet stops with a clear error, and a
// restart waits again (without a second UpdateTable) for the backfill still running.
const indexWaitLimit = 15 * time.Minute

// ttlAttribute is the attribute DynamoDB's TTL reads (epoch seconds).
const ttlAttribute = "expiresAt"

// tableIndexes are the GSIs this version of the store reads. A new version that needs
// another index adds it here: CreateTable creates it with a new table and adds it to a
// deployed one. Every index key attribute is a string; a key may name several attributes
// of a kind (DynamoDB's multi-attribute keys: up to 4 HASH and 4 RANGE, in order), and the
// table's own keys among them.
func tableIndexes() []types.GlobalSecondaryIndex {
	return []types.GlobalSecondaryIndex{{
		// GSI1, the sparse unread list (AP4).
		IndexName: aws.String(gsi1Name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrGSI1PK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrGSI1SK), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}, {
		// GSI2, the type index (AP5): partition (pk, type), sort id, from attributes every
		// notification has had since the first version, so a deployed table gains it by
		// DynamoDB's backfill alone (no item is rewritten). Projection ALL: a typed page
		// renders every field, from the index, in one round trip.
		IndexName: aws.String(gsi2Name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrType), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrID), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}}
}

// tableStream is the stream the relay reads (package relay): old and new images.
func tableStream() *types.StreamSpecification {
	return &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
}

// stringAttrs returns a string attribute definition for each distinct name, in the order
// of first appearance (an attribute in several keys is defined once, as DynamoDB requires).
func stringAttrs(names ...string) []types.AttributeDefinition {
	out := make([]types.AttributeDefinition, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
	}
	return out
}

// ensureTable brings the existing table to this version: the stream, then each missing
// index of tableIndexes (one UpdateTable each, as DynamoDB requires, waiting until it is
// ACTIVE), then TTL. A table that already has them all costs two describe calls. It
// refuses (with an error naming the setting) what it would have to destroy to change: a
// stream of another view type, TTL on another attribute, an index being deleted.
func (s *Store) ensureTable(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, indexWaitLimit)
		defer cancel()
	}
	desc, err := s.waitTableActive(ctx, "")
	if err != nil {
		return err
	}
	if sp := desc.StreamSpecification; sp == nil || !aws.ToBool(sp.StreamEnabled) {
		if _, err := s.db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(s.table), StreamSpecification: tableStream()}); err != nil {
			return fmt.Errorf("enable the stream of %s: %w", s.table, err)
		}
		s.log.Info("enabled the stream of a deployed table", "table", s.table)
		if desc, err = s.waitTableActive(ctx, ""); err != nil {
			return err
		}
	} else if sp.StreamViewType != types.StreamViewTypeNewAndOldImages {
		return fmt.Errorf("table %s has a %s stream; the relay needs %s (changing it means disabling the stream first)",
			s.table, sp.StreamViewType, types.StreamViewTypeNewAndOldImages)
	}
	for _, want := range tableIndexes() {
		name := aws.ToString(want.IndexName)
		status := indexStatus(desc, name)
		if status == "" {
			var keys []string
			for _, k := range want.KeySchema {
				keys = append(keys, aws.ToString(k.AttributeName))
			}
			_, err := s.db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
				TableName:            aws.String(s.table),
				AttributeDefinitions: stringAttrs(keys...),
				GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
					IndexName: want.IndexName, KeySchema: want.KeySchema, Projection: want.Projection,
				}}},
			})
			if err != nil {
				return fmt.Errorf("add index %s to %s: %w", name, s.table, err)
			}
			s.log.Info("adding an index to a deployed table: waiting for its backfill", "table", s.table, "index", name)
		} else if status == types.IndexStatusDeleting {
			return fmt.Errorf("index %s of %s is being deleted, and this version reads it: create the table's index again once it is gone", name, s.table)
		}
		if desc, err = s.waitTableActive(ctx, name); err != nil {
			return err
		}
	}
	return s.ensureTTL(ctx)
}

// ensureTTL enables TTL on ttlAttribute unless it is enabled (or being enabled) already.
func (s *Store) ensureTTL(ctx context.Context) error {
	out, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if err != nil {
		return fmt.Errorf("describe TTL of %s: %w", s.table, err)
	}
	if d := out.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if a := aws.ToString(d.AttributeName); a != ttlAttribute {
				return fmt.Errorf("table %s has TTL on %q; this version needs it on %q (disable it first)", s.table, a, ttlAttribute)
			}
			return nil
		}
	}
	_, err = s.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(s.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", s.table, err)
	}
	return nil
}

// waitTableActive polls DescribeTable (every 200 ms, backing off to 5 s) until the table
// is ACTIVE and, when index is not "", that index is ACTIVE too; it returns the last
// description. When ctx ends first, the error says what was still pending (wrapping
// ctx's error, context.DeadlineExceeded for the bound).
func (s *Store) waitTableActive(ctx context.Context, index string) (*types.TableDescription, error) {
	delay := 200 * time.Millisecond
	start := time.Now()
	for {
		out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil:
		case errors.As(err, &notFound) && ctx.Err() == nil:
			// Just created: DynamoDB may not describe it yet.
			out = &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: "not described yet"}}
		case ctx.Err() != nil:
			return nil, fmt.Errorf("wait for table %s: %w", s.table, ctx.Err())
		default:
			return nil, fmt.Errorf("describe table %s: %w", s.table, err)
		}
		t := out.Table
		pending := ""
		if t.TableStatus != types.TableStatusActive {
			pending = fmt.Sprintf("table %s is %s", s.table, t.TableStatus)
		} else if index != "" {
			switch st := indexStatus(t, index); st {
			case types.IndexStatusActive:
			case "":
				return nil, fmt.Errorf("index %s of %s is gone while waiting for it", index, s.table)
			default:
				pending = fmt.Sprintf("index %s of %s is %s (backfilling: %v)", index, s.table, st, aws.ToBool(indexBackfilling(t, index)))
			}
		}
		if pending == "" {
			return t, nil
		}
		select {
		case <-ctx.Done():
			err := ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%s after %v, past the deadline: DynamoDB is still building it; start again later (the wait resumes without a second update): %w",
					pending, time.Since(start).Round(time.Second), err)
			}
			return nil, fmt.Errorf("%s: %w", pending, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// indexStatus returns the status of the table's GSI name ("" when it has none).
func indexStatus(t *types.TableDescription, name string) types.IndexStatus {
	for _, g := range t.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == name {
			return g.IndexStatus
		}
	}
	return ""
}

// indexBackfilling returns the Backfilling flag of the table's GSI name (nil when absent).
func indexBackfilling(t *types.TableDescription, name string) *bool {
	for _, g := range t.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == name {
			return g.Backfilling
		}
	}
	return nil
}
