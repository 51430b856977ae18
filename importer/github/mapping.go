package github

import "strings"

// mappingTable documents the mapping; keep it in step with doc.go. '§' stands for a
// backtick, which a Go raw string cannot hold.
const mappingTable = `| Notification field | Taken from the webhook payload |
|---|---|
| Recipients | §repository.owner.login§, §issue.user.login§, §pull_request.user.login§, the assignees (§assignee§, §assignees[]§ and the issue's or pull request's §assignee§, §assignees[]§), the requested reviewers (§requested_reviewer§, §pull_request.requested_reviewers[]§; teams ignored) and the logins @-mentioned in the issue, pull request, comment, review and release bodies (outside code). Never §sender.login§. Deduplicated case-insensitively; logins failing §inbox.CheckID§ dropped; at most 100. A payload with no recipient is skipped. |
| Type | §<event>.<action>§ (§issue_comment.created§), or §<event>§ without an action (§push§) |
| Category | the event name (§issues§, §pull_request§, §issue_comment§) |
| Actor | the sender: id and name §sender.login§, avatar §sender.avatar_url§, url §sender.html_url§ |
| Target kind | the most specific of §comment§, §review§, §release§, §pull_request§, §issue§, else §repository§ |
| Target id | the object's §node_id§, else its numeric §id§, else (repository) §full_name§ |
| Target title | issue or pull request §title§; release §name§ (else §tag_name§); repository §full_name§; a comment takes the title of its issue, pull request or discussion (§commit <sha7>§ for commit comments) |
| Target url | the object's §html_url§ |
| Title | a sentence like GitHub's: "octocat commented on issue #1: Spelling error in the README file" |
| Body | the target's body, CRLF to LF, trimmed, at most 280 runes ending in "…" |
| Payload | §{"repository", "event", "action", "number", "html_url"}§ (empty fields omitted), never the webhook payload |
| Idempotency key | §gh:<event>:§ + the first 32 hex digits of the SHA-256 of the payload's canonical JSON (sorted keys, numbers verbatim): a second import writes nothing |
| Tenant | chosen by the caller of Import (§default§ by convention) |
`

// Mapping returns a markdown table documenting how a webhook payload becomes a
// notification, for the README. It is constant text.
func Mapping() string { return strings.ReplaceAll(mappingTable, "§", "`") }
