package store

import (
	"context"
	"fmt"

	"github.com/inboxgw/gateway/inbox"
)

// Nodes resolves what global ids name for v (node, nodes and Viewer.notification), aligned
// with refs. A notification ref resolves to v's notification with that ULID. A profile ref
// resolves to the actor or target only when v's notification refs[i].Notification exists
// and names that profile (issue 8, item 6: a profile is visible only through a
// notification of the viewer); otherwise, and for refs that could not be keys, the result
// is empty, exactly as for something that does not exist.
//
// Everything is read in one BatchGetItem (≤100 keys a call, calls sent concurrently,
// UnprocessedKeys retried; see batchGet): META (for the read state, only when a
// notification ref is asked), the notifications named or anchoring, and the profiles
// (those in the shared profile cache are not read again). The partition of every
// notification key comes from v, never from the id.
func (s *Store) Nodes(ctx context.Context, v inbox.Viewer, refs []inbox.NodeRef) ([]inbox.NodeResult, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	out := make([]inbox.NodeResult, len(refs))
	if err := s.announcementNodes(ctx, v, refs, out); err != nil {
		return nil, err
	}
	upk := userPK(v)
	keys := make([]itemKey, 0, 2*len(refs)+1)
	seen := make(map[itemKey]bool, 2*len(refs)+1)
	add := func(k itemKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	cached := make(map[string]*inbox.Profile)
	needMeta := false
	for _, r := range refs {
		if !ValidNotificationID(r.Notification) {
			continue
		}
		if r.Profile.ID == "" {
			needMeta = true
			add(itemKey{upk, notifSK(r.Notification)})
			continue
		}
		if !validRef(r.Profile) {
			continue
		}
		add(itemKey{upk, notifSK(r.Notification)})
		pk := profilePK(v.TenantID, r.Profile)
		if _, ok := cached[pk]; ok {
			continue
		}
		if p, ok := s.profiles.get(pk); ok {
			cached[pk] = p
			continue
		}
		add(itemKey{pk, skProfile})
	}
	if len(keys) == 0 {
		return out, nil
	}
	if needMeta {
		add(itemKey{upk, skMeta})
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{})
	if err != nil {
		return nil, err
	}
	meta, items, err := decodeMarkSnapshot(got, v)
	if err != nil {
		return nil, err
	}
	var it profileItem
	for i, r := range refs {
		n, ok := items[r.Notification]
		if !ok {
			continue
		}
		if r.Profile.ID == "" {
			out[i].Notification = toNotification(n, &meta)
			continue
		}
		if !names(n, r.Profile) {
			continue
		}
		pk := profilePK(v.TenantID, r.Profile)
		p := cached[pk]
		if p == nil {
			raw, ok := got[itemKey{pk, skProfile}]
			if !ok {
				continue
			}
			it = profileItem{}
			if err := decodeProfile(raw, &it); err != nil {
				return nil, fmt.Errorf("decode profile: %w", err)
			}
			p = newProfile(r.Profile, &it)
			cached[pk] = p
			s.profiles.add(pk, p)
		}
		// A copy per result: profiles are shared, the anchor is this notification's.
		if p.Actor != nil {
			a := *p.Actor
			a.Via = r.Notification
			out[i].Actor = &a
		} else if p.Target != nil {
			t := *p.Target
			t.Via = r.Notification
			out[i].Target = &t
		}
	}
	return out, nil
}

// names reports whether notification n has ref as its actor (or an activity's) or target.
func names(n *notificationItem, ref inbox.ProfileRef) bool {
	if ref.TargetKind == "" {
		if n.ActorID == ref.ID {
			return true
		}
		// A batched notification names the actors of its activities too.
		for _, a := range n.Activities {
			if a.ActorID == ref.ID {
				return true
			}
		}
		return false
	}
	return n.TargetKind == ref.TargetKind && n.TargetID == ref.ID
}
