package relay

import (
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// convertMap converts a stream image to the DynamoDB attribute values the store decodes
// (the two SDK packages have identical but distinct types).
func convertMap(m map[string]types.AttributeValue) map[string]ddbtypes.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]ddbtypes.AttributeValue, len(m))
	for k, v := range m {
		if c := convert(v); c != nil {
			out[k] = c
		}
	}
	return out
}

func convert(v types.AttributeValue) ddbtypes.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &ddbtypes.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &ddbtypes.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &ddbtypes.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &ddbtypes.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &ddbtypes.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &ddbtypes.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &ddbtypes.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &ddbtypes.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberM:
		return &ddbtypes.AttributeValueMemberM{Value: convertMap(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]ddbtypes.AttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			if c := convert(e); c != nil {
				l = append(l, c)
			}
		}
		return &ddbtypes.AttributeValueMemberL{Value: l}
	}
	return nil
}
