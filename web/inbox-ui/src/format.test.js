import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actorLine, relativeTime, mergePage, prependLive, snoozeUntil, tokenExpired } from './format.js';

test('actorLine renders batches', () => {
  assert.equal(actorLine('Ann', 10), 'Ann and 9 others');
  assert.equal(actorLine('Ann', 2), 'Ann and 1 other');
  assert.equal(actorLine('Ann', 1), 'Ann');
  assert.equal(actorLine('Ann', undefined), 'Ann');
  assert.equal(actorLine('Ann', 0), 'Ann');
  assert.equal(actorLine(null, 5), '');
});

test('relativeTime uses the locale', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  assert.equal(relativeTime('2026-01-01T11:55:00Z', now, 'en'), '5 minutes ago');
  assert.equal(relativeTime('2026-01-01T10:00:00Z', now, 'de'), 'vor 2 Stunden');
  assert.equal(relativeTime('2025-12-31T12:00:00Z', now, 'en'), 'yesterday');
  assert.equal(relativeTime('nonsense', now, 'en'), '');
});

test('mergePage drops duplicates and prependLive keeps one copy', () => {
  const l = [{ id: 'a' }, { id: 'b' }];
  assert.deepEqual(mergePage(l, [{ id: 'b' }, { id: 'c' }]).map((n) => n.id), ['a', 'b', 'c']);
  assert.deepEqual(prependLive(l, { id: 'z' }).map((n) => n.id), ['z', 'a', 'b']);
  assert.equal(prependLive(l, { id: 'a' }), l);
});

test('snoozeUntil', () => {
  const now = new Date(2026, 0, 1, 22, 30);
  assert.equal(snoozeUntil('hour', now).getTime() - now.getTime(), 3600000);
  const t = snoozeUntil('tomorrow', now);
  assert.deepEqual([t.getDate(), t.getHours(), t.getMinutes()], [2, 9, 0]);
});

test('tokenExpired', () => {
  const mk = (exp) => 'h.' + Buffer.from(JSON.stringify({ exp })).toString('base64url') + '.s';
  const now = 1_700_000_000_000;
  assert.equal(tokenExpired(mk(now / 1000 + 3600), now), false);
  assert.equal(tokenExpired(mk(now / 1000 + 10), now), true);
  assert.equal(tokenExpired('garbage', now), true);
});
