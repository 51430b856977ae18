package github

import (
	"strings"
)

// title is the notification's sentence, in GitHub's words: who did what to which thing.
func title(event string, p *payload) string {
	who := "Someone"
	if p.Sender != nil && p.Sender.Login != "" {
		who = p.Sender.Login
	}
	repo := ""
	if p.Repository != nil {
		repo = p.Repository.FullName
	}
	in := ""
	if repo != "" {
		in = " in " + repo
	}
	subj, subjTitle := subject(p)
	// onSubj puts the subject at "{}" in verb, or after it.
	onSubj := func(verb string) string {
		if !strings.Contains(verb, "{}") {
			verb += " {}"
		}
		s := who + " " + strings.Replace(verb, "{}", subj, 1)
		if subjTitle != "" {
			s += ": " + subjTitle
		}
		return s
	}
	a := p.Action
	switch event {
	case "issue_comment", "pull_request_review_comment", "discussion_comment", "commit_comment":
		switch a {
		case "created":
			return onSubj("commented on")
		case "edited", "deleted":
			return onSubj(a + " a comment on")
		}
		return onSubj(words(a) + " a comment on")
	case "pull_request_review":
		switch a {
		case "submitted":
			state := ""
			if p.Review != nil {
				state = strings.ToLower(p.Review.State)
			}
			switch state {
			case "approved":
				return onSubj("approved")
			case "changes_requested":
				return onSubj("requested changes on")
			}
			return onSubj("reviewed")
		case "dismissed", "edited":
			return onSubj(a + " a review on")
		}
		return onSubj(words(a) + " a review on")
	case "pull_request_review_thread":
		return onSubj(words(a) + " a review thread on")
	case "issues", "pull_request", "discussion":
		return onSubj(threadVerb(p))
	case "release":
		name := ""
		if p.Release != nil {
			name = releaseName(p.Release)
		}
		verb := words(a)
		if a == "prereleased" {
			verb = "pre-released"
		}
		return who + " " + verb + " release " + name + in
	case "push":
		return who + " pushed to " + strings.TrimPrefix(p.Ref, "refs/heads/") + in
	case "create", "delete":
		return who + " " + event + "d " + p.RefType + " " + p.Ref + in
	case "fork":
		s := who + " forked " + repo
		if p.Forkee != nil && p.Forkee.FullName != "" {
			s += " to " + p.Forkee.FullName
		}
		return s
	case "star":
		if a == "deleted" {
			return who + " unstarred " + repo
		}
		return who + " starred " + repo
	case "watch":
		return who + " starred " + repo
	}
	if a != "" {
		return who + ": " + words(event) + " " + words(a) + in
	}
	return who + ": " + words(event) + in
}

// subject names the issue, pull request, discussion or commit a payload is about, with its
// title: ("pull request #2", "Update the README").
func subject(p *payload) (string, string) {
	switch {
	case p.PullRequest != nil:
		return "pull request #" + itoa(p.PullRequest.Number), p.PullRequest.Title
	case p.Issue != nil:
		if len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null" {
			return "pull request #" + itoa(p.Issue.Number), p.Issue.Title
		}
		return "issue #" + itoa(p.Issue.Number), p.Issue.Title
	case p.Discussion != nil:
		return "discussion #" + itoa(p.Discussion.Number), p.Discussion.Title
	case p.Comment != nil && p.Comment.CommitID != "":
		s := "commit " + shortSHA(p.Comment.CommitID)
		if p.Repository != nil {
			s += " in " + p.Repository.FullName
		}
		return s, ""
	case p.Repository != nil:
		return p.Repository.FullName, ""
	}
	return "something", ""
}

// threadVerb is what the sender did to an issue, pull request or discussion; the subject
// goes at "{}", or after the verb.
func threadVerb(p *payload) string {
	a := p.Action
	login := func(u *user) string {
		if u == nil || u.Login == "" {
			return "someone"
		}
		return u.Login
	}
	label := "a"
	if p.Label != nil && p.Label.Name != "" {
		label = "the " + p.Label.Name
	}
	switch a {
	case "assigned", "unassigned":
		if p.Assignee != nil && p.Sender != nil && strings.EqualFold(p.Assignee.Login, p.Sender.Login) {
			if a == "assigned" {
				return "self-assigned"
			}
			return "unassigned themselves from"
		}
		if a == "assigned" {
			return "assigned " + login(p.Assignee) + " to"
		}
		return "unassigned " + login(p.Assignee) + " from"
	case "review_requested", "review_request_removed":
		who := login(p.RequestedReviewer)
		if p.RequestedReviewer == nil && p.RequestedTeam != nil {
			who = p.RequestedTeam.Name
		}
		if a == "review_requested" {
			return "requested a review from " + who + " on"
		}
		return "removed the review request for " + who + " on"
	case "labeled":
		return "added " + label + " label to"
	case "unlabeled":
		return "removed " + label + " label from"
	case "milestoned":
		if p.Milestone != nil && p.Milestone.Title != "" {
			return "added the " + p.Milestone.Title + " milestone to"
		}
		return "added a milestone to"
	case "demilestoned":
		return "removed the milestone from"
	case "closed":
		if p.PullRequest != nil && p.PullRequest.Merged {
			return "merged"
		}
		return "closed"
	case "synchronize":
		return "pushed commits to"
	case "converted_to_draft":
		return "converted {} to draft"
	case "ready_for_review":
		return "marked {} as ready for review"
	case "category_changed":
		return "changed the category of"
	case "answered", "unanswered":
		return "marked an answer on"
	}
	return words(a)
}

// words turns an identifier like "ready_for_review" into "ready for review".
func words(s string) string { return strings.ReplaceAll(s, "_", " ") }
