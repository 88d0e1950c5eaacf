-- Values of each kind in WHERE, ORDER BY and aggregates: timestamps (timestamptz in UTC,
-- timestamp read as UTC), booleans (IS TRUE / IS FALSE and friends), text comparisons
-- where some rows are NULL, real columns, and text input that does not fit its type.
CREATE TABLE ev (id bigint PRIMARY KEY, at timestamptz, day timestamp, ok boolean, name text, r real);
INSERT INTO ev VALUES
    (1, '2026-11-30 12:00:00+00', '2026-11-30 12:00:00', true, 'alpha', 0.5),
    (2, '2026-11-30 14:30:00+02', '2026-12-01 00:00:00', false, 'beta', 1.5),
    (3, '2026-01-01 00:00:00+00', '2026-01-01 00:00:00', NULL, 'gamma', 2.5),
    (4, NULL, NULL, true, NULL, NULL);

-- timestamps: an offset is folded into UTC
SELECT id, at, day FROM ev ORDER BY at;
-- => [(3, '2026-01-01 00:00:00+00:00', '2026-01-01 00:00:00+00:00'),
--     (1, '2026-11-30 12:00:00+00:00', '2026-11-30 12:00:00+00:00'),
--     (2, '2026-11-30 12:30:00+00:00', '2026-12-01 00:00:00+00:00'), (4, None, None)]
SELECT id FROM ev WHERE at > '2026-06-01 00:00:00+00' ORDER BY id;
-- => [(1,), (2,)]
SELECT id FROM ev WHERE at = '2026-11-30 12:30:00+00';
-- => [(2,)]
SELECT id FROM ev WHERE day BETWEEN '2026-11-01' AND '2026-11-30 23:59:59' ORDER BY id;
-- => [(1,)]
SELECT max(at), min(day), count(at) FROM ev;
-- => [('2026-11-30 12:30:00+00:00', '2026-01-01 00:00:00+00:00', 3)]
-- a timestamptz as text: PostgreSQL's output form, in UTC
SELECT id, at::text, CAST(at AS text) || '!' FROM ev WHERE id IN (1, 2) ORDER BY id;
-- => [(1, '2026-11-30 12:00:00+00', '2026-11-30 12:00:00+00!'),
--     (2, '2026-11-30 12:30:00+00', '2026-11-30 12:30:00+00!')]
INSERT INTO ev (id, at) VALUES (5, 'not a time');
-- !! 22007

-- booleans
SELECT id FROM ev WHERE ok = true;
-- => [(1,), (4,)]
SELECT id FROM ev WHERE ok IS TRUE;
-- => [(1,), (4,)]
SELECT id FROM ev WHERE ok IS NOT TRUE;
-- => [(2,), (3,)]
SELECT id FROM ev WHERE ok IS FALSE;
-- => [(2,)]
SELECT id FROM ev WHERE ok IS NOT FALSE;
-- => [(1,), (3,), (4,)]
SELECT DISTINCT ok FROM ev ORDER BY ok DESC;
-- => [(None,), (True,), (False,)]
INSERT INTO ev (id, ok) VALUES (5, 'yes'), (6, 'off') RETURNING id, ok;
-- => [(5, True), (6, False)]
INSERT INTO ev (id, ok) VALUES (7, 'maybe');
-- !! 22P02

-- text: comparisons, BETWEEN and functions over a column with NULLs
SELECT id FROM ev WHERE name > 'b';
-- => [(2,), (3,)]
SELECT id FROM ev WHERE name BETWEEN 'alpha' AND 'beta';
-- => [(1,), (2,)]
SELECT id FROM ev WHERE name NOT BETWEEN 'alpha' AND 'beta';
-- => [(3,)]
SELECT id FROM ev WHERE upper(name) > 'B';
-- => [(2,), (3,)]
SELECT id, name < 'b' AS early FROM ev WHERE id <= 4 ORDER BY id;
-- => [(1, True), (2, False), (3, False), (4, None)]
SELECT id, name FROM ev WHERE id <= 4 ORDER BY name DESC;
-- => [(4, None), (3, 'gamma'), (2, 'beta'), (1, 'alpha')]
SELECT id FROM ev WHERE name = 'ALPHA';
-- => []
SELECT id FROM ev WHERE name LIKE 'a\_%';
-- => []
SELECT min(name), max(name) FROM ev;
-- => [('alpha', 'gamma')]
INSERT INTO ev (id, name) VALUES (8, 7) RETURNING name;
-- => [('7',)]

-- real: values exact in float4 compare as written
SELECT id FROM ev WHERE r = 0.5;
-- => [(1,)]
SELECT id FROM ev WHERE r > 1 ORDER BY r DESC;
-- => [(3,), (2,)]
SELECT sum(r), avg(r), max(r) FROM ev;
-- => [(4.5, 1.5, 2.5)]
SELECT id, -r, r * 2 FROM ev WHERE id = 1;
-- => [(1, -0.5, 1.0)]
