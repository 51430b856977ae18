// Pure helpers of the inbox components: no DOM, no network; tested by format.test.js.

/**
 * actorLine names who caused a notification.
 * @param {string|null|undefined} actor the actor's display name (null: nobody named)
 * @param {number|null|undefined} activityCount how many activities a batched notification holds (1 or absent: one)
 * @returns {string} "Ann", "Ann and 1 other", "Ann and 9 others", or "" without an actor
 */
export function actorLine(actor, activityCount) {
  if (!actor) return '';
  const n = Number.isInteger(activityCount) && activityCount > 1 ? activityCount - 1 : 0;
  if (n === 0) return actor;
  return `${actor} and ${n} ${n === 1 ? 'other' : 'others'}`;
}

const UNITS = [
  ['year', 365 * 24 * 3600],
  ['month', 30 * 24 * 3600],
  ['week', 7 * 24 * 3600],
  ['day', 24 * 3600],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
];

/**
 * relativeTime formats an instant relative to now with Intl.RelativeTimeFormat.
 * @param {string|number|Date} when the instant (an RFC 3339 string, epoch milliseconds or a Date)
 * @param {number} now epoch milliseconds
 * @param {string} [locale] a BCP 47 tag; the runtime's default when absent or invalid
 * @returns {string} e.g. "5 minutes ago", "vor 2 Stunden"; "" for an invalid instant
 */
export function relativeTime(when, now, locale) {
  const t = new Date(when).getTime();
  if (Number.isNaN(t)) return '';
  let fmt;
  try {
    fmt = new Intl.RelativeTimeFormat(locale || undefined, { numeric: 'auto' });
  } catch {
    fmt = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  }
  const secs = Math.round((t - now) / 1000);
  for (const [unit, size] of UNITS) {
    if (Math.abs(secs) >= size || unit === 'second') {
      return fmt.format(Math.trunc(secs / size), unit);
    }
  }
  return '';
}

/**
 * mergePage appends a page of notifications to a list, dropping ids already present
 * (a live item that also arrives on a later page is shown once).
 * @param {Array<{id:string}>} list the items shown, newest first
 * @param {Array<{id:string}>} page the next page
 * @returns {Array<{id:string}>} a new list
 */
export function mergePage(list, page) {
  const seen = new Set(list.map((n) => n.id));
  return list.concat(page.filter((n) => !seen.has(n.id)));
}

/**
 * prependLive puts a live notification at the top unless its id is already listed.
 * @param {Array<{id:string}>} list the items shown, newest first
 * @param {{id:string}} n the new notification
 * @returns {Array<{id:string}>} a new list
 */
export function prependLive(list, n) {
  if (list.some((m) => m.id === n.id)) return list;
  return [n, ...list];
}

/**
 * snoozeUntil computes the end of a snooze.
 * @param {'hour'|'tomorrow'} kind one hour from now, or 09:00 local time the next day
 * @param {Date} now the current time
 * @returns {Date}
 */
export function snoozeUntil(kind, now) {
  if (kind === 'hour') return new Date(now.getTime() + 3600 * 1000);
  const d = new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1, 9, 0, 0, 0);
  return d;
}

/**
 * tokenExpired tells whether a JWT's exp claim has passed (with a 30 s margin), so getToken is called again.
 * @param {string} token a compact JWT
 * @param {number} now epoch milliseconds
 * @returns {boolean} true when expired or unreadable
 */
export function tokenExpired(token, now) {
  try {
    const b = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = JSON.parse(atob(b)).exp;
    return typeof exp !== 'number' || exp * 1000 - 30000 <= now;
  } catch {
    return true;
  }
}
