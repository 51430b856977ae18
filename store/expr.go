package store

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// exprNames hands the expression builder the attribute names that are data: a category
// inside a preferences switch's name ("cat#<category>#<channel>"), a device id as a key
// of the devices map. expression.Name would split such a name at its dots;
// expression.NameNoDotSplit keeps them, but it still reads a trailing "[n]" as a list
// index and refuses any other bracket ("a[b]", "a[", "]"), which inbox.CheckID allows.
// So a data name holding '[' or ']' goes into the builder as a stand-in ('\x00' and a
// number: no name has a control character, inbox.CheckID) that build swaps back for
// the name in ExpressionAttributeNames. The zero exprNames is ready to use.
type exprNames struct {
	standIns map[string]string // stand-in → name
	byName   map[string]string // name → stand-in
}

// name returns the builder's name of the data name n (one attribute, or one map key
// when appended to its map's name with AppendName).
func (e *exprNames) name(n string) expression.NameBuilder {
	if !strings.ContainsAny(n, "[]") {
		return expression.NameNoDotSplit(n)
	}
	if s, ok := e.byName[n]; ok {
		return expression.NameNoDotSplit(s)
	}
	if e.standIns == nil {
		e.standIns, e.byName = map[string]string{}, map[string]string{}
	}
	s := "\x00" + strconv.Itoa(len(e.standIns))
	e.standIns[s], e.byName[n] = n, s
	return expression.NameNoDotSplit(s)
}

// build builds b and puts the data names back in place of their stand-ins.
func (e *exprNames) build(b expression.Builder) (expression.Expression, error) {
	x, err := b.Build()
	if err != nil || len(e.standIns) == 0 {
		return x, err
	}
	names := x.Names()
	for alias, n := range names {
		if real, ok := e.standIns[n]; ok {
			names[alias] = real
		}
	}
	return x, nil
}

// allOf is the conjunction of conds: the unset ConditionBuilder when there are none
// (for expression.Builder.WithCondition only when IsSet).
func allOf(conds []expression.ConditionBuilder) expression.ConditionBuilder {
	switch len(conds) {
	case 0:
		return expression.ConditionBuilder{}
	case 1:
		return conds[0]
	}
	return expression.And(conds[0], conds[1], conds[2:]...)
}

// buildUpdate builds the update up on condition that every one of conds holds (none:
// unconditional), with the data names of names (nil: none).
func buildUpdate(up expression.UpdateBuilder, conds []expression.ConditionBuilder, names *exprNames) (expression.Expression, error) {
	b := expression.NewBuilder().WithUpdate(up)
	if c := allOf(conds); c.IsSet() {
		b = b.WithCondition(c)
	}
	if names == nil {
		names = &exprNames{}
	}
	return names.build(b)
}

// itemAbsent is the condition that the item written does not exist yet.
func itemAbsent() expression.ConditionBuilder { return expression.Name(attrPK).AttributeNotExists() }

// itemPresent is the condition that the item written exists.
func itemPresent() expression.ConditionBuilder { return expression.Name(attrPK).AttributeExists() }

// condPut is the Put of item into table on condition that cond holds.
func condPut(table string, item map[string]types.AttributeValue, cond expression.ConditionBuilder) (*types.Put, error) {
	x, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("store: build put condition: %w", err)
	}
	return &types.Put{TableName: aws.String(table), Item: item, ConditionExpression: x.Condition(),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}, nil
}
