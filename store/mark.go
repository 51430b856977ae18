package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Notifications returns v's notifications with the given ULIDs, aligned with ids; nil where
// v has no such notification (another user's id is indistinguishable from a missing one).
// One BatchGetItem reads them together with META (for the watermark).
func (s *Store) Notifications(ctx context.Context, v inbox.Viewer, ids []string) ([]*inbox.Notification, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	out := make([]*inbox.Notification, len(ids))
	keys := []itemKey{{userPK(v), skMeta}}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if ValidNotificationID(id) && !seen[id] {
			seen[id] = true
			keys = append(keys, itemKey{userPK(v), notifSK(id)})
		}
	}
	if len(keys) == 1 {
		return out, nil
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{})
	if err != nil {
		return nil, err
	}
	meta, items, err := decodeMarkSnapshot(got, v)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if it, ok := items[id]; ok {
			out[i] = toNotification(it, &meta)
		}
	}
	return out, nil
}

func decodeMarkSnapshot(got map[itemKey]map[string]types.AttributeValue, v inbox.Viewer) (metaItem, map[string]*notificationItem, error) {
	var meta metaItem
	items := make(map[string]*notificationItem, len(got))
	for k, raw := range got {
		if k.pk != userPK(v) {
			continue
		}
		if k.sk == skMeta {
			if err := decodeMeta(raw, &meta); err != nil {
				return meta, nil, fmt.Errorf("decode meta: %w", err)
			}
			continue
		}
		if _, ok := idFromNotifSK(k.sk); !ok {
			continue // a group item read with the snapshot (applyChunk)
		}
		it := new(notificationItem)
		if err := decodeNotification(raw, it); err != nil {
			return meta, nil, fmt.Errorf("decode notification: %w", err)
		}
		items[it.ID] = it
	}
	return meta, items, nil
}
