// Package github turns GitHub webhook events into inbox notifications the way GitHub's own
// notifications would address them. It reads the event catalogue published by
// @octokit/webhooks-examples (api.github.com/index.json: a JSON array of event definitions,
// each {"name", "description", "actions", "properties", "examples": [payload...]}) and maps
// every example payload to one inbox.SendInput; Import then sends them through an
// inbox.Sender (the store).
//
// # Mapping
//
// For each example payload of each event:
//
//   - Recipients, in this order: the repository owner (repository.owner.login), the issue and
//     pull request authors (issue.user.login, pull_request.user.login), the assignees (the
//     top-level assignee and assignees[], and issue/pull_request .assignee and .assignees[]),
//     the requested reviewers (top-level requested_reviewer, pull_request.requested_reviewers[];
//     teams, which have no login, are ignored), and every login @-mentioned in the issue, pull
//     request, comment, review or release body. A mention is '@' not preceded by a word
//     character, followed by 1..39 letters, digits or single hyphens, not starting or ending
//     with a hyphen and not followed by '/' (a team mention) or '_' (not a login); mentions
//     inside fenced code blocks and inline code spans are ignored, as GitHub does. The sender
//     (sender.login) is never a recipient. Logins are deduplicated case-insensitively (the
//     first spelling wins), those failing inbox.CheckID are dropped, and at most
//     inbox.MaxRecipients are kept. Bots are recipients like anyone else. A payload left with
//     no recipient produces no notification and is counted in Stats.Skipped.
//   - Type is "<event>.<action>" ("issue_comment.created"), or "<event>" for events without
//     an action (push, fork...). Category is the event name.
//   - Actor is the sender: ActorID and Name are its login, AvatarURL its avatar_url, URL its
//     html_url. Payloads without a sender (security_advisory) have no actor.
//   - Target is the most specific of comment (kind "comment"), review ("review"), release
//     ("release"), pull_request ("pull_request"), issue ("issue"), else repository
//     ("repository"); none when the payload has no repository either. TargetID is the
//     object's GraphQL node_id (global, stable, never contains '#'), else its numeric id,
//     else (repository) its full_name. Title is the issue or pull request title, the release
//     name (else its tag), or the repository full_name; a comment takes the title of the
//     issue, pull request or discussion it belongs to ("commit <sha7>" for commit comments).
//     URL is the object's html_url.
//   - Title is a short sentence in GitHub's words: "octocat commented on issue #1: Spelling
//     error in the README file", "Codertocat requested a review from octocat on pull request
//     #2: Update the README with new information.".
//   - Body is the target's body text (comment, review, release, pull request or issue),
//     CRLF normalised to LF, trimmed and truncated to BodyMaxRunes runes ending in "…".
//   - Payload is a small JSON object {"repository", "event", "action", "number", "html_url"}
//     (empty fields omitted), never the webhook payload itself.
//   - IdempotencyKey is "gh:<event>:" followed by the first 32 hex digits of the SHA-256 of
//     the payload's canonical JSON (object keys sorted, numbers kept verbatim, no HTML
//     escaping). It is deterministic, so importing the same file twice writes nothing the
//     second time, and identical example payloads share one key.
//
// The tenant is chosen by the caller of Import. Mapping returns the same rules as a
// markdown table for the README.
package github
