package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Push devices live in the user's PROFILE item (AP24), in the map attribute `devices`
// (device id → token, platform, createdAt), so a send's routing reads them with the
// profile in its one BatchGetItem.
//
// A device belongs to one user of its tenant: its ownership item (deviceOwnerPK, sk
// OWNER) names the user whose PROFILE holds it. Every change of a device writes the
// PROFILE items it touches and the ownership item in ONE TransactWriteItems, each action
// on condition that the item is as read (the owner named; the device present, or absent
// with room in the map; devicesRev for an eviction), and is re-read and retried on a conflict: so a registration by another user moves the
// device (out of the previous owner's map, into the new one's) and no committed state
// leaves two users holding it, whatever the interleaving. Devices registered before
// ownership items existed have none; their first registration by anyone writes one.
// The delivery worker checks ownership again before each push (RecheckDevice).

// Attribute names of the devices map and its revision in the PROFILE item, and of the
// ownership item.
const (
	attrDevices    = "devices"
	attrDevicesRev = "devicesRev"
	attrOwnerUser  = "userId"
)

// deviceAttr is one device in the PROFILE item's devices map (createdAt in Unix ms).
type deviceAttr struct {
	Token     string `dynamodbav:"token"`
	Platform  string `dynamodbav:"platform"`
	CreatedAt int64  `dynamodbav:"createdAt"`
}

// deviceOwnerItem is a push token's ownership item: UserID is the one user of the tenant
// whose PROFILE holds the device DeviceID (updatedAt in Unix ms: when it last moved).
type deviceOwnerItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	UserID     string `dynamodbav:"userId"`
	DeviceID   string `dynamodbav:"deviceId"`
	Platform   string `dynamodbav:"platform"`
	UpdatedAt  int64  `dynamodbav:"updatedAt"`
}

// ownerKey is the key of the ownership item of d in tenantID.
func ownerKey(tenantID string, d inbox.Device) itemKey {
	return itemKey{deviceOwnerPK(tenantID, d.Platform, d.Token), skDeviceOwner}
}

// decodeOwner returns the user an ownership item names ("" for nil: no item).
func decodeOwner(item map[string]types.AttributeValue) (string, error) {
	if item == nil {
		return "", nil
	}
	var it deviceOwnerItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return "", fmt.Errorf("decode device owner: %w", err)
	}
	return it.UserID, nil
}

// devices returns the profile's devices, oldest first (by creation, then id).
func (it *userProfileItem) devices() []inbox.Device {
	if len(it.Devices) == 0 {
		return nil
	}
	out := make([]inbox.Device, 0, len(it.Devices))
	for id, d := range it.Devices {
		out = append(out, inbox.Device{ID: id, Token: d.Token, Platform: d.Platform, CreatedAt: msTimeUTC(d.CreatedAt)})
	}
	slices.SortFunc(out, func(a, b inbox.Device) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// profileItem reads v's PROFILE item (strongly consistent GetItem; the zero item when none).
func (s *Store) profileItem(ctx context.Context, v inbox.Viewer) (userProfileItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{userPK(v), skUserProfile}.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return userProfileItem{}, fmt.Errorf("get user profile: %w", err)
	}
	return decodeProfileItem(out.Item)
}

// decodeProfileItem decodes a user's PROFILE item (nil: none, the zero item).
func decodeProfileItem(item map[string]types.AttributeValue) (userProfileItem, error) {
	var it userProfileItem
	if item != nil {
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return userProfileItem{}, fmt.Errorf("decode user profile: %w", err)
		}
	}
	return it, nil
}

// storedDevice is the device id as the devices map holds it.
func storedDevice(id string, d deviceAttr) inbox.Device {
	return inbox.Device{ID: id, Token: d.Token, Platform: d.Platform, CreatedAt: msTimeUTC(d.CreatedAt)}
}

// RegisterDevice registers v's push device token on platform (inbox.PlatformAPNs or
// inbox.PlatformFCM) and returns it. A device belongs to one user of the tenant: a token
// another user holds moves to v (it leaves their devices, and their pushes no longer
// reach it). Registering a token v holds changes nothing and returns the device as
// stored (idempotent). A user has at most inbox.MaxDevices: registering one more evicts
// the oldest (with its ownership item).
//
// One strongly consistent BatchGetItem of v's PROFILE and the token's ownership item
// (AP24), and a second one, only when there are any, of the previous owner's PROFILE and
// the evicted devices' ownership items; then ONE TransactWriteItems: Put the ownership
// item (condition: the owner read, or none), add the device to v's devices map
// (devicesAction: on condition that it has room, or, for an eviction, that devicesRev is
// as read), REMOVE the device from the previous owner's map (condition: it is
// there; when it was not, a ConditionCheck that it still is not), Delete the evicted devices' ownership items that name v (condition: they still
// do; for one naming another user or none, a ConditionCheck that it still does). A conflict re-reads and retries. Errors: BAD_USER_INPUT for an invalid viewer,
// token or platform (inbox.CheckDevice); THROTTLED when concurrent changes kept winning.
func (s *Store) RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Device{}, err
	}
	if err := inbox.CheckDevice(token, platform); err != nil {
		return inbox.Device{}, err
	}
	id := inbox.DeviceID(platform, token)
	pkey := itemKey{userPK(v), skUserProfile}
	okey := ownerKey(v.TenantID, inbox.Device{Token: token, Platform: platform})
	return retryConflicts(ctx, func() (inbox.Device, error) {
		got, err := s.batchGet(ctx, []itemKey{pkey, okey}, batchGetOptions{consistent: true})
		if err != nil {
			return inbox.Device{}, err
		}
		it, err := decodeProfileItem(got[pkey])
		if err != nil {
			return inbox.Device{}, err
		}
		owner, err := decodeOwner(got[okey])
		if err != nil {
			return inbox.Device{}, err
		}
		stored, have := it.Devices[id]
		if have && owner == v.UserID {
			return storedDevice(id, stored), nil
		}
		now := s.now().UnixMilli()
		devs := maps.Clone(it.Devices)
		if devs == nil {
			devs = map[string]deviceAttr{}
		}
		var evicted []inbox.Device
		if !have {
			cur := it.devices()
			for i := 0; len(devs) >= inbox.MaxDevices; i++ {
				delete(devs, cur[i].ID)
				evicted = append(evicted, cur[i])
			}
			stored = deviceAttr{Token: token, Platform: platform, CreatedAt: now}
			devs[id] = stored
		}

		// What the other items hold: the previous owner's map, the evicted ownerships.
		prev := inbox.Viewer{TenantID: v.TenantID, UserID: owner}
		prevKey := itemKey{userPK(prev), skUserProfile}
		moving := owner != "" && owner != v.UserID
		var more []itemKey
		if moving {
			more = append(more, prevKey)
		}
		for _, e := range evicted {
			more = append(more, ownerKey(v.TenantID, e))
		}
		got2, err := s.batchGet(ctx, more, batchGetOptions{consistent: true})
		if err != nil {
			return inbox.Device{}, err
		}

		t := &txn{}
		own, err := attributevalue.MarshalMap(deviceOwnerItem{PK: okey.pk, SK: okey.sk, EntityType: entityDevOwner,
			UserID: v.UserID, DeviceID: id, Platform: platform, UpdatedAt: now})
		if err != nil {
			return inbox.Device{}, fmt.Errorf("encode device owner: %w", err)
		}
		put, err := condPut(s.table, own, ownedBy(owner))
		if err != nil {
			return inbox.Device{}, err
		}
		t.add(okey, types.TransactWriteItem{Put: put})

		act, err := s.devicesAction(pkey, it, id, stored, have, len(evicted) > 0, devs)
		if err != nil {
			return inbox.Device{}, err
		}
		t.add(pkey, act)

		if moving {
			pit, err := decodeProfileItem(got2[prevKey])
			if err != nil {
				return inbox.Device{}, err
			}
			// Without the device in their map (an unregistration raced this read; or a
			// device registered before ownership items existed) only the ownership item
			// moves, on condition that their map still lacks it: their own registration
			// may put it back before this commits (the ownership item then names them
			// again, as read), and without the check both maps held it.
			if _, ok := pit.Devices[id]; ok {
				rm, err := removeDeviceUpdate(s.table, prevKey, id)
				if err != nil {
					return inbox.Device{}, err
				}
				t.add(prevKey, types.TransactWriteItem{Update: rm})
			} else {
				check, err := deviceAbsentCheck(s.table, prevKey, id)
				if err != nil {
					return inbox.Device{}, err
				}
				t.add(prevKey, types.TransactWriteItem{ConditionCheck: check})
			}
		}
		for _, e := range evicted {
			k := ownerKey(v.TenantID, e)
			o, err := decodeOwner(got2[k])
			if err != nil {
				return inbox.Device{}, err
			}
			// Another user's ownership (or none: a device registered before ownership
			// items existed) stays, on condition that it is as read: v's own registration
			// of the device may write v's before this commits without changing v's map
			// (devicesRev), and without the check the item named v, whose map lost it.
			oa, err := ownerAction(s.table, k, o, v.UserID)
			if err != nil {
				return inbox.Device{}, err
			}
			t.add(k, oa)
		}
		if _, err := s.db.TransactWriteItems(ctx, t.input(ctx)); err != nil {
			// A cancellation (a condition or a conflict) is retried after a re-read.
			return inbox.Device{}, fmt.Errorf("register device: %w", err)
		}
		return storedDevice(id, stored), nil
	})
}

// devicesAction is the action of a registration of device id (stored) on the PROFILE
// item k whose read state is it, so that the map holds it at commit:
//   - have (the map read holds it already): a ConditionCheck that it still does;
//   - an eviction (or no map yet): the whole map devs written on condition that
//     devicesRev is the one read (no map: that there is none);
//   - else the device alone added, on condition that it is not there and the map has
//     room: registrations of different devices by one user commute instead of
//     conflicting on devicesRev.
//
// Every change of the map adds one to devicesRev.
func (s *Store) devicesAction(k itemKey, it userProfileItem, id string, stored deviceAttr, have, evict bool, devs map[string]deviceAttr) (types.TransactWriteItem, error) {
	var names exprNames
	devsName, rev := expression.Name(attrDevices), expression.Name(attrDevicesRev)
	dev := devsName.AppendName(names.name(id))
	et, upAt := expression.Name("entityType"), expression.Name("updatedAt")
	touch := func(up expression.UpdateBuilder) expression.UpdateBuilder {
		return up.Set(et, et.IfNotExists(expression.Value(entityUserProfile))).
			Set(upAt, upAt.IfNotExists(expression.Value(0))).
			Add(rev, expression.Value(1))
	}
	switch {
	case have:
		x, err := names.build(expression.NewBuilder().WithCondition(dev.AttributeExists()))
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("device condition: %w", err)
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(s.table), Key: k.av(),
			ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names()}}, nil
	case evict || it.Devices == nil:
		m, err := attributevalue.Marshal(devs)
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("encode devices: %w", err)
		}
		cond := devsName.AttributeNotExists().And(rev.AttributeNotExists())
		if it.Devices != nil || it.DevicesRev != 0 {
			cond = rev.Equal(expression.Value(it.DevicesRev))
		}
		x, err := buildUpdate(touch(expression.Set(devsName, expression.Value(m))), []expression.ConditionBuilder{cond}, &names)
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("devices update: %w", err)
		}
		return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: k.av(),
			UpdateExpression: x.Update(), ConditionExpression: x.Condition(),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}}, nil
	}
	av, err := attributevalue.Marshal(stored)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("encode device: %w", err)
	}
	x, err := buildUpdate(touch(expression.Set(dev, expression.Value(av))),
		[]expression.ConditionBuilder{dev.AttributeNotExists(), devsName.Size().LessThan(expression.Value(inbox.MaxDevices))}, &names)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("device update: %w", err)
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.table), Key: k.av(),
		UpdateExpression: x.Update(), ConditionExpression: x.Condition(),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}}, nil
}

// removeDeviceUpdate is the Update taking device id out of the devices map of the PROFILE
// item k (and counting a change), on condition that it is there. The error is the
// builder's, for an id it cannot name (the empty one).
func removeDeviceUpdate(table string, k itemKey, id string) (*types.Update, error) {
	var names exprNames
	dev := expression.Name(attrDevices).AppendName(names.name(id))
	x, err := buildUpdate(expression.Remove(dev).Add(expression.Name(attrDevicesRev), expression.Value(1)),
		[]expression.ConditionBuilder{dev.AttributeExists()}, &names)
	if err != nil {
		return nil, fmt.Errorf("device removal: %w", err)
	}
	return &types.Update{
		TableName:                 aws.String(table),
		Key:                       k.av(),
		UpdateExpression:          x.Update(),
		ConditionExpression:       x.Condition(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}, nil
}

// deviceAbsentCheck is the ConditionCheck that the devices map of the PROFILE item k
// does not hold device id (true also when the item or its map does not exist). The error
// is the builder's, for an id it cannot name (the empty one).
func deviceAbsentCheck(table string, k itemKey, id string) (*types.ConditionCheck, error) {
	var names exprNames
	dev := expression.Name(attrDevices).AppendName(names.name(id))
	x, err := names.build(expression.NewBuilder().WithCondition(dev.AttributeNotExists()))
	if err != nil {
		return nil, fmt.Errorf("device absence condition: %w", err)
	}
	return &types.ConditionCheck{TableName: aws.String(table), Key: k.av(),
		ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names()}, nil
}

// ownedBy is the condition that an ownership item names userID ("": that there is none).
func ownedBy(userID string) expression.ConditionBuilder {
	if userID == "" {
		return itemAbsent()
	}
	return expression.Name(attrOwnerUser).Equal(expression.Value(userID))
}

// ownerAction is the action of user's change on the ownership item k read naming owner
// ("": none): its Delete on condition that it still names user when it does, else a
// ConditionCheck that it still names owner (none: that there is none).
func ownerAction(table string, k itemKey, owner, user string) (types.TransactWriteItem, error) {
	x, err := expression.NewBuilder().WithCondition(ownedBy(owner)).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("device owner condition: %w", err)
	}
	if owner != "" && owner == user {
		return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: k.av(),
			ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}}, nil
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: k.av(),
		ConditionExpression: x.Condition(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}}, nil
}

// UnregisterDevice removes v's device named by tokenOrID: its token (on any platform)
// or its device id. It reports whether one was removed (false: none matched, or it was
// removed concurrently, by a move to another user too). A GetItem of the PROFILE item
// (AP24), then per matching device (a token registered on both platforms is two) what
// removeDevice does. Another user's ownership of the token is never touched. Errors:
// BAD_USER_INPUT for an invalid viewer or an empty tokenOrID; THROTTLED when concurrent
// changes kept winning.
func (s *Store) UnregisterDevice(ctx context.Context, v inbox.Viewer, tokenOrID string) (bool, error) {
	if err := checkViewer(v); err != nil {
		return false, err
	}
	if tokenOrID == "" || len(tokenOrID) > inbox.MaxDeviceTokenBytes {
		return false, inbox.Errorf(inbox.CodeBadUserInput, "a device token or id must be 1..%d bytes", inbox.MaxDeviceTokenBytes)
	}
	it, err := s.profileItem(ctx, v)
	if err != nil {
		return false, err
	}
	removed := false
	for _, d := range it.devices() {
		if d.ID != tokenOrID && d.Token != tokenOrID {
			continue
		}
		ok, err := s.removeDevice(ctx, v, d)
		if err != nil {
			return removed, err
		}
		removed = removed || ok
	}
	return removed, nil
}

// PruneDevice removes v's device deviceID (a provider said its token is no longer
// valid). Removing a device that is not there changes nothing (idempotent), and another
// user's device of the same token (after a move) is not v's to prune. A GetItem of the
// PROFILE item (AP24), then what removeDevice does. Errors: BAD_USER_INPUT for an invalid
// viewer or a malformed device id; THROTTLED when concurrent changes kept winning.
func (s *Store) PruneDevice(ctx context.Context, v inbox.Viewer, deviceID string) error {
	if err := checkViewer(v); err != nil {
		return err
	}
	if !inbox.IsDeviceID(deviceID) {
		return inbox.Errorf(inbox.CodeBadUserInput, "malformed device id %q", deviceID)
	}
	it, err := s.profileItem(ctx, v)
	if err != nil {
		return err
	}
	d, ok := it.Devices[deviceID]
	if !ok {
		return nil
	}
	_, err = s.removeDevice(ctx, v, storedDevice(deviceID, d))
	return err
}

// removeDevice takes device d out of v's devices map (and counts a change), on condition
// that it is there, and deletes the token's ownership item when it names v: a strongly
// consistent GetItem of the ownership item, then ONE TransactWriteItems of the map's
// Update and either the Delete of the ownership item (condition: it still names v) or,
// when it names another user or none, a ConditionCheck that it still does; a change of
// the ownership item re-reads and retries. It reports false when d was not in the map.
func (s *Store) removeDevice(ctx context.Context, v inbox.Viewer, d inbox.Device) (bool, error) {
	pkey := itemKey{userPK(v), skUserProfile}
	okey := ownerKey(v.TenantID, d)
	return retryConflicts(ctx, func() (bool, error) {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: okey.av(), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return false, fmt.Errorf("get device owner: %w", err)
		}
		owner, err := decodeOwner(out.Item)
		if err != nil {
			return false, err
		}
		rm, err := removeDeviceUpdate(s.table, pkey, d.ID)
		if err != nil {
			return false, err
		}
		t := &txn{}
		t.add(pkey, types.TransactWriteItem{Update: rm})
		oa, err := ownerAction(s.table, okey, owner, v.UserID)
		if err != nil {
			return false, err
		}
		t.add(okey, oa)
		_, err = s.db.TransactWriteItems(ctx, t.input(ctx))
		switch {
		case err == nil:
			return true, nil
		case t.conditionFailed(err, pkey):
			return false, nil
		}
		// The ownership item changed (or a conflict): read it again.
		return false, fmt.Errorf("remove device: %w", err)
	})
}

// RecheckDevice decides again, when the push delivery job is sent, whether its device is
// still its recipient's: "" when it is; inbox.ReasonDeviceMoved when another user of the
// tenant has registered the token since (its ownership item names them);
// inbox.ReasonNoDevice when it has left the recipient's devices otherwise (unregistered,
// pruned, evicted). A device registered before ownership items existed has none and is
// the recipient's while their devices hold it. ONE strongly consistent BatchGetItem of
// the recipient's PROFILE and the token's ownership item (AP24). Errors: BAD_USER_INPUT
// for a job that is no push delivery or a malformed user.
func (s *Store) RecheckDevice(ctx context.Context, job inbox.DeliveryJob) (string, error) {
	v := inbox.Viewer{TenantID: job.Ref.TenantID, UserID: job.UserID}
	if err := checkViewer(v); err != nil {
		return "", err
	}
	if job.Channel != inbox.ChannelPush || inbox.CheckDevice(job.To, job.Platform) != nil {
		return "", inbox.Errorf(inbox.CodeBadUserInput, "not a push delivery to a device")
	}
	d := inbox.Device{ID: inbox.DeviceID(job.Platform, job.To), Token: job.To, Platform: job.Platform}
	pkey, okey := itemKey{userPK(v), skUserProfile}, ownerKey(v.TenantID, d)
	got, err := s.batchGet(ctx, []itemKey{pkey, okey}, batchGetOptions{consistent: true})
	if err != nil {
		return "", err
	}
	owner, err := decodeOwner(got[okey])
	if err != nil {
		return "", err
	}
	if owner != "" && owner != v.UserID {
		return inbox.ReasonDeviceMoved, nil
	}
	it, err := decodeProfileItem(got[pkey])
	if err != nil {
		return "", err
	}
	if held, ok := it.Devices[d.ID]; !ok || held.Token != d.Token || held.Platform != d.Platform {
		return inbox.ReasonNoDevice, nil
	}
	return "", nil
}

// Devices returns v's push devices, oldest first. One strongly consistent GetItem of the
// PROFILE item (AP24). Errors: BAD_USER_INPUT for an invalid viewer.
func (s *Store) Devices(ctx context.Context, v inbox.Viewer) ([]inbox.Device, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	it, err := s.profileItem(ctx, v)
	if err != nil {
		return nil, err
	}
	return it.devices(), nil
}
