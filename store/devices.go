package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// Push devices live in the user's PROFILE item (AP24), in the map attribute `devices`
// (device id → token, platform, createdAt), so a send's routing reads them with the
// profile in its one BatchGetItem. RegisterDevice rewrites the map on condition that
// devicesRev is the one read; removals take one device out (and count a change).

// Attribute names of the devices map and its revision in the PROFILE item.
const (
	attrDevices    = "devices"
	attrDevicesRev = "devicesRev"
)

// deviceAttr is one device in the PROFILE item's devices map (createdAt in Unix ms).
type deviceAttr struct {
	Token     string `dynamodbav:"token"`
	Platform  string `dynamodbav:"platform"`
	CreatedAt int64  `dynamodbav:"createdAt"`
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
	var it userProfileItem
	if out.Item != nil {
		if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
			return userProfileItem{}, fmt.Errorf("decode user profile: %w", err)
		}
	}
	return it, nil
}

// RegisterDevice registers v's push device token on platform (inbox.PlatformAPNs or
// inbox.PlatformFCM) and returns it. Registering a token already registered on that
// platform changes nothing and returns the device as stored (idempotent). A user has
// at most inbox.MaxDevices: registering one more evicts the oldest. A GetItem of the
// PROFILE item (AP24), then one UpdateItem writing its devices map on condition that
// devicesRev is the one read (re-read and retried on a concurrent change). Errors:
// BAD_USER_INPUT for an invalid viewer, token or platform (inbox.CheckDevice);
// THROTTLED when concurrent changes kept winning.
func (s *Store) RegisterDevice(ctx context.Context, v inbox.Viewer, token, platform string) (inbox.Device, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Device{}, err
	}
	if err := inbox.CheckDevice(token, platform); err != nil {
		return inbox.Device{}, err
	}
	id := inbox.DeviceID(platform, token)
	return retryConflicts(ctx, func() (inbox.Device, error) {
		it, err := s.profileItem(ctx, v)
		if err != nil {
			return inbox.Device{}, err
		}
		if d, ok := it.Devices[id]; ok {
			return inbox.Device{ID: id, Token: d.Token, Platform: d.Platform, CreatedAt: msTimeUTC(d.CreatedAt)}, nil
		}
		now := s.now().UnixMilli()
		devs := maps.Clone(it.Devices)
		if devs == nil {
			devs = map[string]deviceAttr{}
		}
		cur := it.devices()
		for i := 0; len(devs) >= inbox.MaxDevices; i++ {
			delete(devs, cur[i].ID)
		}
		devs[id] = deviceAttr{Token: token, Platform: platform, CreatedAt: now}
		m, err := attributevalue.Marshal(devs)
		if err != nil {
			return inbox.Device{}, fmt.Errorf("encode devices: %w", err)
		}
		cond := "attribute_not_exists(#rev)"
		vals := map[string]types.AttributeValue{
			":devs": m, ":next": numAV(it.DevicesRev + 1),
			":et": &types.AttributeValueMemberS{Value: entityUserProfile}, ":zero": numAV(0),
		}
		if it.DevicesRev != 0 {
			cond = "#rev = :rev"
			vals[":rev"] = numAV(it.DevicesRev)
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       itemKey{userPK(v), skUserProfile}.av(),
			UpdateExpression:          aws.String("SET #devs = :devs, #rev = :next, #et = if_not_exists(#et, :et), #up = if_not_exists(#up, :zero)"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#devs": attrDevices, "#rev": attrDevicesRev, "#et": "entityType", "#up": "updatedAt"},
			ExpressionAttributeValues: vals,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			return inbox.Device{}, errRetry
		case err != nil:
			return inbox.Device{}, fmt.Errorf("register device: %w", err)
		}
		return inbox.Device{ID: id, Token: token, Platform: platform, CreatedAt: msTimeUTC(now)}, nil
	})
}

// UnregisterDevice removes v's device named by tokenOrID: its token (on any platform)
// or its device id. It reports whether one was removed (false: none matched, or it was
// removed concurrently). A GetItem of the PROFILE item (AP24), then one UpdateItem per
// matching device (a token registered on both platforms is two devices). Errors:
// BAD_USER_INPUT for an invalid viewer or an empty tokenOrID.
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
		ok, err := s.removeDevice(ctx, v, d.ID)
		if err != nil {
			return removed, err
		}
		removed = removed || ok
	}
	return removed, nil
}

// PruneDevice removes v's device deviceID (a provider said its token is no longer
// valid). Removing a device that is not there changes nothing (idempotent). One
// UpdateItem of the PROFILE item (AP24). Errors: BAD_USER_INPUT for an invalid viewer or
// a malformed device id.
func (s *Store) PruneDevice(ctx context.Context, v inbox.Viewer, deviceID string) error {
	if err := checkViewer(v); err != nil {
		return err
	}
	if !inbox.IsDeviceID(deviceID) {
		return inbox.Errorf(inbox.CodeBadUserInput, "malformed device id %q", deviceID)
	}
	_, err := s.removeDevice(ctx, v, deviceID)
	return err
}

// removeDevice takes device id out of v's devices map (and counts a change), on
// condition that it is there; false when it was not.
func (s *Store) removeDevice(ctx context.Context, v inbox.Viewer, id string) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{userPK(v), skUserProfile}.av(),
		UpdateExpression:          aws.String("REMOVE #devs.#id ADD #rev :one"),
		ConditionExpression:       aws.String("attribute_exists(#devs.#id)"),
		ExpressionAttributeNames:  map[string]string{"#devs": attrDevices, "#id": id, "#rev": attrDevicesRev},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": numAV(1)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fmt.Errorf("remove device: %w", err)
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
