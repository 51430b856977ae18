package deploy

import (
	"reflect"
	"regexp"
	"slices"
	"testing"
)

// systemErrorsExempt are operations the gateway calls that the system-errors alarm leaves
// out, and why.
var systemErrorsExempt = map[string]string{
	"DescribeTable":    "the relay's start and each stream listing: it retries, and a relay that cannot read alarms through RelayStalledAlarm",
	"DescribeStream":   "the relay's shard listing (every 10 s): as DescribeTable",
	"GetShardIterator": "once per shard the relay opens: as DescribeTable",
}

// ref and getAtt are the long forms of !Ref and !GetAtt, as parseTemplate reads them.
func ref(name string) any { return map[string]any{"Ref": name} }

func getAtt(res, attr string) any { return map[string]any{"Fn::GetAtt": []any{res, attr}} }

// TestTableIsProtectedAndObserved: the template's table is on-demand with the optional cap
// on itself and every index, kept when the stack is deleted or the table replaced,
// protected from deletion, backed up continuously, with Contributor Insights on the table
// and every index; its name is the TableName parameter; the outputs give what the gateway
// and its role need.
func TestTableIsProtectedAndObserved(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	id, table := oneResource(t, tmpl, "AWS::DynamoDB::Table")
	props := table["Properties"]
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"DeletionPolicy"}, "Retain"},
		{[]string{"UpdateReplacePolicy"}, "Retain"},
		{[]string{"Properties", "TableName"}, ref("TableName")},
		{[]string{"Properties", "BillingMode"}, "PAY_PER_REQUEST"},
		{[]string{"Properties", "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"}, true},
		{[]string{"Properties", "DeletionProtectionEnabled"}, true},
		{[]string{"Properties", "ContributorInsightsSpecification", "Enabled"}, true},
	} {
		got, err := get(table, c.path...)
		if err != nil {
			t.Errorf("%s: %v", id, err)
		} else if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s.%v = %v, want %v", id, c.path, got, c.want)
		}
	}
	capacity, err := get(props, "OnDemandThroughput")
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if cond, _ := get(capacity, "Fn::If"); !reflect.DeepEqual(oneOrMany(cond)[0], "HasMaxThroughput") {
		t.Errorf("%s.OnDemandThroughput = %v, want it only when a cap is set (Fn::If HasMaxThroughput)", id, capacity)
	}
	gsis, err := list(props, "GlobalSecondaryIndexes")
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	for _, g := range gsis {
		name, _ := literal(g, "IndexName")
		if on, err := get(g, "ContributorInsightsSpecification", "Enabled"); err != nil || on != true {
			t.Errorf("index %s: Contributor Insights %v (%v), want enabled", name, on, err)
		}
		if c, err := get(g, "OnDemandThroughput"); err != nil || !reflect.DeepEqual(c, capacity) {
			t.Errorf("index %s: OnDemandThroughput %v (%v), want the table's %v", name, c, err, capacity)
		}
	}
	for name, want := range map[string]any{
		"TableName":         ref(id),
		"TableArn":          getAtt(id, "Arn"),
		"StreamArn":         getAtt(id, "StreamArn"),
		"GatewayPolicyArn":  ref("GatewayPolicy"),
		"MigratorPolicyArn": ref("MigratorPolicy"),
	} {
		if got, err := get(tmpl, "Outputs", name, "Value"); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("output %s = %v (%v), want %v", name, got, err, want)
		}
	}
}

// alarmMetric is one metric an alarm reads.
type alarmMetric struct {
	Name       string
	Dimensions map[string]any
	Stat       string
}

// alarmMetrics returns the metrics an alarm reads (its own metric, or each MetricStat of
// its metric math), checking that a metric-math alarm returns one expression that uses
// every metric it reads.
func alarmMetrics(t *testing.T, id string, alarm map[string]any) []alarmMetric {
	t.Helper()
	props, _ := alarm["Properties"].(map[string]any)
	dims := func(v any) map[string]any {
		out := map[string]any{}
		for _, d := range oneOrMany(v) {
			n, _ := literal(d, "Name")
			out[n], _ = get(d, "Value")
		}
		return out
	}
	if _, ok := props["Metrics"]; !ok {
		name, _ := props["MetricName"].(string)
		stat, _ := props["Statistic"].(string)
		return []alarmMetric{{Name: name, Dimensions: dims(props["Dimensions"]), Stat: stat}}
	}
	var out []alarmMetric
	var ids, exprs []string
	returned := 0
	for _, m := range oneOrMany(props["Metrics"]) {
		mid, _ := literal(m, "Id")
		if r, _ := get(m, "ReturnData"); r == true {
			returned++
		}
		if e, err := literal(m, "Expression"); err == nil {
			exprs = append(exprs, e)
			continue
		}
		name, err := literal(m, "MetricStat", "Metric", "MetricName")
		if err != nil {
			t.Errorf("%s metric %s: %v", id, mid, err)
			continue
		}
		if ns, _ := literal(m, "MetricStat", "Metric", "Namespace"); ns != "AWS/DynamoDB" {
			t.Errorf("%s metric %s: namespace %q, want AWS/DynamoDB", id, mid, ns)
		}
		d, _ := get(m, "MetricStat", "Metric", "Dimensions")
		stat, _ := literal(m, "MetricStat", "Stat")
		out = append(out, alarmMetric{Name: name, Dimensions: dims(d), Stat: stat})
		ids = append(ids, mid)
	}
	if returned != 1 {
		t.Errorf("%s returns %d metrics, want 1", id, returned)
	}
	for _, mid := range ids {
		used := regexp.MustCompile(`\b` + regexp.QuoteMeta(mid) + `\b`)
		if !slices.ContainsFunc(exprs, used.MatchString) {
			t.Errorf("%s reads metric %s but no expression uses it", id, mid)
		}
	}
	return out
}

// TestAlarmsCoverTheTableAndTheCodesOperations: the throttling alarms read reads and writes
// of the table and of every index; the system-errors alarm reads every operation the
// gateway calls (derived from its source, as for the policy) and no other; the relay alarm
// watches the stream's reads with missing data as breaching; every alarm notifies the
// optional SNS topic.
func TestAlarmsCoverTheTableAndTheCodesOperations(t *testing.T) {
	t.Parallel()
	tmpl := loadTemplate(t)
	tableID, _ := oneResource(t, tmpl, "AWS::DynamoDB::Table")
	ops := deriveGateway(t).GatewayOps
	throttled := map[string]bool{} // "ReadThrottleEvents GSI1", "WriteThrottleEvents " (the table)
	systemErrors := map[string]bool{}
	relay := 0
	topic := map[string]any{"Fn::If": []any{"HasAlarmTopic", []any{ref("AlarmTopicArn")}, ref("AWS::NoValue")}}
	alarms := resources(t, tmpl, "AWS::CloudWatch::Alarm")
	for _, id := range sortedKeys(alarms) {
		alarm := alarms[id]
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if got, _ := get(alarm, "Properties", k); !reflect.DeepEqual(got, topic) {
				t.Errorf("%s.%s = %v, want the AlarmTopicArn parameter when set", id, k, got)
			}
		}
		for _, m := range alarmMetrics(t, id, alarm) {
			if !reflect.DeepEqual(m.Dimensions["TableName"], ref(tableID)) {
				t.Errorf("%s: metric %s of %v, want TableName !Ref %s", id, m.Name, m.Dimensions["TableName"], tableID)
			}
			switch m.Name {
			case "ReadThrottleEvents", "WriteThrottleEvents":
				gsi, _ := m.Dimensions["GlobalSecondaryIndexName"].(string)
				throttled[m.Name+" "+gsi] = true
			case "SystemErrors":
				op, _ := m.Dimensions["Operation"].(string)
				systemErrors[op] = true
			case "SuccessfulRequestLatency":
				treat, _ := get(alarm, "Properties", "TreatMissingData")
				if m.Dimensions["Operation"] != "GetRecords" || m.Stat != "SampleCount" || treat != "breaching" {
					t.Errorf("%s: %+v (missing data %v), want the SampleCount of GetRecords, missing data breaching", id, m, treat)
				}
				relay++
			default:
				t.Errorf("%s reads %s: this test does not know it", id, m.Name)
			}
		}
	}
	for _, gsi := range append([]string{""}, sortedKeys(templateSchema(t, tmpl).Indexes)...) {
		for _, metric := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
			if !throttled[metric+" "+gsi] {
				where := "the table"
				if gsi != "" {
					where = "index " + gsi
				}
				t.Errorf("no alarm reads %s of %s", metric, where)
			}
		}
	}
	want := map[string]bool{}
	for op := range ops {
		if _, exempt := systemErrorsExempt[op]; !exempt {
			want[op] = true
		}
	}
	if got, w := sortedKeys(systemErrors), sortedKeys(want); !slices.Equal(got, w) {
		t.Errorf("SystemErrors alarmed for %v, want the gateway's operations %v", got, w)
	}
	for op := range systemErrorsExempt {
		if !ops[op] {
			t.Errorf("systemErrorsExempt names %s, which the gateway no longer calls: drop it", op)
		}
	}
	if ops["GetRecords"] && relay != 1 {
		t.Errorf("%d alarms on the relay's reads, want 1", relay)
	}
	if cond := alarms["RelayStalledAlarm"]["Condition"]; cond != "HasRelay" {
		t.Errorf("RelayStalledAlarm's condition %v, want HasRelay (a deployment without a relay has no reads to watch)", cond)
	}
}
