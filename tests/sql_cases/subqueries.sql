-- Correlated scalar subqueries (a column of the outer row read inside), ARRAY(SELECT ...)
-- with array_to_string, unnest, subscripts and ||, and VALUES as a relation: what psql's
-- \d sends to describe a table, here on tables of the case's own.
CREATE TABLE t (id bigint PRIMARY KEY, k int, name text);
CREATE TABLE u (id bigint PRIMARY KEY, tk int, label text);
INSERT INTO t VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 20, 'three'), (4, NULL, 'four');
INSERT INTO u VALUES (1, 20, 'x'), (2, 20, 'y'), (3, 10, 'z'), (4, 30, 'w');

-- correlated scalar subqueries: one value for each outer row, NULL where none
SELECT t.id, (SELECT count(*) FROM u WHERE u.tk = t.k) AS n FROM t ORDER BY t.id;
-- => [(1, 1), (2, 2), (3, 2), (4, 0)]
SELECT t.id, (SELECT u.label FROM u WHERE u.tk = t.k AND u.id > 2) FROM t ORDER BY 1;
-- => [(1, 'z'), (2, None), (3, None), (4, None)]
SELECT t.name FROM t WHERE (SELECT max(u.id) FROM u WHERE u.tk = t.k) > 2 ORDER BY t.name;
-- => [('one',)]
SELECT a.id, (SELECT b.name FROM t b WHERE b.id = a.id + 1) FROM t a ORDER BY a.id;
-- => [(1, 'two'), (2, 'three'), (3, 'four'), (4, None)]
-- the outer row's columns beside the subquery's own, and two levels out
SELECT t.id, (SELECT min(u.id) + t.id FROM u WHERE u.tk = t.k) FROM t ORDER BY t.id;
-- => [(1, 4), (2, 3), (3, 4), (4, None)]
SELECT t.id, (SELECT (SELECT count(*) FROM u x WHERE x.tk = t.k AND x.id <> y.id) FROM u y WHERE y.id = 1) FROM t ORDER BY 1;
-- => [(1, 1), (2, 1), (3, 1), (4, 0)]
-- a vector top-k per outer row, its WHERE reading the outer row (no plan kept across rows)
CREATE TABLE pts (id bigint PRIMARY KEY, grp int, v vector(2));
INSERT INTO pts VALUES (1, 1, '[0,0]'), (2, 1, '[5,5]'), (3, 2, '[1,1]'), (4, 2, '[9,8]'), (5, 3, '[3,0]');
SELECT t.id, (SELECT p.id FROM pts p WHERE p.grp = t.id ORDER BY p.v <-> '[6,6]' LIMIT 1) FROM t ORDER BY 1;
-- => [(1, 2), (2, 4), (3, 5), (4, None)]
SELECT p.id, (SELECT q.id FROM pts q WHERE q.id <> p.id ORDER BY q.v <-> p.v LIMIT 1) FROM pts p ORDER BY 1;
-- => [(1, 3), (2, 4), (3, 1), (4, 2), (5, 3)]
-- more than one row for an outer row
SELECT t.id, (SELECT u.id FROM u WHERE u.tk = t.k) FROM t;
-- !! 21000
-- ARRAY(SELECT ...): uncorrelated and correlated, empty as {}
SELECT ARRAY(SELECT label FROM u ORDER BY label);
-- => [(['w', 'x', 'y', 'z'],)]
SELECT t.id, array(SELECT u.id FROM u WHERE u.tk = t.k ORDER BY u.id DESC) FROM t ORDER BY 1;
-- => [(1, [3]), (2, [2, 1]), (3, [2, 1]), (4, [])]
SELECT t.id, array_to_string(array(SELECT u.label FROM u WHERE u.tk = t.k ORDER BY 1), ',') FROM t ORDER BY 1;
-- => [(1, 'z'), (2, 'x,y'), (3, 'x,y'), (4, '')]
SELECT array_to_string(ARRAY(SELECT name FROM t WHERE k IS NULL) || ARRAY(SELECT label FROM u WHERE id < 3 ORDER BY 1), ' + ');
-- => [('four + x + y',)]
SELECT (ARRAY(SELECT id FROM u ORDER BY id DESC))[1], (ARRAY(SELECT id FROM u))[9];
-- => [(4, None)]
-- a subquery in the subquery's FROM reads the outer row too
SELECT t.id, (SELECT count(*) FROM (SELECT u.id FROM u WHERE u.tk = t.k) s) FROM t ORDER BY 1;
-- => [(1, 1), (2, 2), (3, 2), (4, 0)]
-- ... and from a join's relations, a UNION's legs
SELECT t.id, (SELECT count(*) FROM u z JOIN (SELECT u.id FROM u WHERE u.tk = t.k) s ON s.id = z.id) FROM t ORDER BY 1;
-- => [(1, 1), (2, 2), (3, 2), (4, 0)]
SELECT t.id, (SELECT count(*) FROM generate_series(1, t.id) g, u WHERE u.id = g) FROM t ORDER BY 1;
-- => [(1, 1), (2, 2), (3, 3), (4, 4)]
SELECT t.id, array(SELECT u.id FROM u WHERE u.tk = t.k UNION SELECT t.id + 10 ORDER BY 1) FROM t ORDER BY 1;
-- => [(1, [3, 11]), (2, [1, 2, 12]), (3, [1, 2, 13]), (4, [14])]
SELECT t.id, (SELECT column1 + 1 FROM (VALUES (t.k)) v) FROM t ORDER BY 1;
-- => [(1, 11), (2, 21), (3, 21), (4, None)]
-- unnest in FROM, of a correlated array
SELECT t.id, (SELECT count(*) FROM unnest(array(SELECT u.id FROM u WHERE u.tk = t.k)) x) FROM t ORDER BY 1;
-- => [(1, 1), (2, 2), (3, 2), (4, 0)]
SELECT x FROM unnest(ARRAY(SELECT label FROM u WHERE tk = 20)) x ORDER BY x DESC;
-- => [('y',), ('x',)]
-- EXISTS, correlated or not, of any columns (an aggregate's one row exists)
SELECT t.id FROM t WHERE EXISTS (SELECT * FROM u WHERE u.tk = t.k AND u.id > 2) ORDER BY 1;
-- => [(1,)]
SELECT t.id, NOT EXISTS (SELECT 1 FROM u WHERE u.tk = t.k) AS none FROM t ORDER BY 1;
-- => [(1, False), (2, False), (3, False), (4, True)]
SELECT EXISTS (SELECT count(*) FROM u WHERE false), EXISTS (SELECT id FROM u WHERE false);
-- => [(True, False)]
-- x = ANY(an array value)
SELECT t.id FROM t WHERE t.k = ANY(ARRAY(SELECT tk FROM u WHERE id > 2)) ORDER BY 1;
-- => [(1,)]
-- VALUES as a relation, and beside a SELECT in UNION ALL
SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v ORDER BY 1 DESC;
-- => [(2, 'b'), (1, 'a')]
SELECT column2 FROM (VALUES (1, 'a'), (2, NULL)) v WHERE column1 > 1;
-- => [(None,)]
SELECT id FROM t WHERE id IN (SELECT tk / 10 FROM u UNION ALL VALUES (4)) ORDER BY 1;
-- => [(1,), (2,), (3,), (4,)]
VALUES (1, 'x'), (2, 'y');
-- => [(1, 'x'), (2, 'y')]
SELECT * FROM (VALUES (1), (2, 3)) v;
-- !! 42601
-- generate_series of integers, string_agg, array_upper
SELECT * FROM generate_series(1, 4) g;
-- => [(1,), (2,), (3,), (4,)]
SELECT g FROM generate_series(10, 1, -4) g;
-- => [(10,), (6,), (2,)]
SELECT count(*) FROM generate_series(5, 1) g;
-- => [(0,)]
SELECT count(*) FROM generate_series(1, NULL) g;
-- => [(0,)]
SELECT * FROM generate_series(1, 3, 0);
-- !! 22023
SELECT string_agg(name, ', ') FROM t WHERE id < 4;
-- => [('one, two, three',)]
SELECT k, string_agg(name, '|') FROM t GROUP BY k ORDER BY k NULLS FIRST;
-- => [(None, 'four'), (10, 'one'), (20, 'two|three')]
SELECT string_agg(name, ',') FROM t WHERE false;
-- => [(None,)]
SELECT string_agg(name, ',') FILTER (WHERE k = 20), count(*) FROM t;
-- => [('two,three', 4)]
SELECT string_agg(id, ',') FROM t;
-- !! 42883
SELECT array_upper(ARRAY(SELECT id FROM t), 1), array_upper(ARRAY(SELECT id FROM t WHERE false), 1);
-- => [(4, None)]
SELECT array_length(ARRAY(SELECT id FROM t), 1), array_length(ARRAY(SELECT id FROM t WHERE false), 1), array_length(ARRAY(SELECT id FROM t), 2);
-- => [(4, None, None)]
-- catalog functions on values PostgreSQL shows the same way
SELECT pg_size_pretty(0::bigint), pg_size_pretty(8192::bigint), pg_size_pretty(10240::bigint), pg_size_pretty(20971519::bigint), pg_size_pretty(123456789::bigint), pg_size_pretty(-16384::bigint);
-- => [('0 bytes', '8192 bytes', '10 kB', '20 MB', '118 MB', '-16 kB')]
SELECT format_type(20, -1), format_type(1043, 14), format_type(25, NULL), format_type(1184, -1);
-- => [('bigint', 'character varying(10)', 'text', 'timestamp with time zone')]
SELECT pg_encoding_to_char(6), pg_encoding_to_char(0), pg_encoding_to_char(-1), pg_encoding_to_char(NULL), current_user = current_role, current_user = session_user, current_catalog = current_database(), current_schema = current_schema();
-- => [('UTF8', 'SQL_ASCII', '', None, True, True, True, True)]
-- the catalog psql's \l, \du, \dT and \df read: this database, the role, pgvector's
-- types and functions (sparsevec's left out of the list)
SELECT pg_encoding_to_char(encoding), datcollate, datctype, datacl FROM pg_database WHERE datname = current_database();
-- => [('UTF8', 'C', 'C', None)]
SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit, rolvaliduntil FROM pg_roles WHERE rolname = current_user;
-- => [(True, True, True, True, True, True, True, -1, None)]
SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' AND t.typrelid = 0 AND t.typelem = 0 AND pg_type_is_visible(t.oid) ORDER BY 1;
-- => [('halfvec',), ('sparsevec',), ('vector',)]
SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), p.prokind FROM pg_proc p WHERE p.proname IN ('subvector', 'vector_dims', 'l2_distance', 'hamming_distance') AND pg_get_function_arguments(p.oid) NOT LIKE 'sparsevec%' AND pg_function_is_visible(p.oid) ORDER BY 1, 2;
-- => [('hamming_distance', 'bit, bit', 'double precision', 'f'), ('l2_distance', 'halfvec, halfvec', 'double precision', 'f'), ('l2_distance', 'vector, vector', 'double precision', 'f'), ('subvector', 'halfvec, integer, integer', 'halfvec', 'f'), ('subvector', 'vector, integer, integer', 'vector', 'f'), ('vector_dims', 'halfvec', 'integer', 'f'), ('vector_dims', 'vector', 'integer', 'f')]
SELECT quote_ident('abc'), quote_ident('Abc'), quote_ident('a b'), quote_ident('select'), quote_ident('a"b'), quote_ident('name'), quote_ident('_x$1'), quote_ident('1x'), quote_ident('');
-- => [('abc', '"Abc"', '"a b"', '"select"', '"a""b"', 'name', '"_x$1"', '"1x"', '""')]
SELECT t.spcname, pg_tablespace_location(t.oid), has_database_privilege(d.datname, 'CONNECT'), pg_has_role(current_user, 'USAGE'), shobj_description(d.oid, 'pg_database'), (SELECT count(*) FROM pg_enum) FROM pg_database d JOIN pg_tablespace t ON d.dattablespace = t.oid WHERE d.datname = current_database();
-- => [('pg_default', '', True, True, None, 0)]
SELECT n.nspname, t.typacl IS NULL, t.typowner > 0 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.typname = 'vector';
-- => [('public', True, True)]
-- a bare name in a subquery over a catalog relation that has no such column is the
-- enclosing query's (psql's \dp names pg_policy's polroles so, two levels down)
SELECT n.nspname, ARRAY(SELECT typname FROM pg_type WHERE typnamespace = n.oid AND nspname = 'public' AND typname IN ('vector', 'halfvec', 'int8') ORDER BY 1) FROM pg_namespace n WHERE n.nspname IN ('public', 'pg_catalog') ORDER BY 1;
-- => [('pg_catalog', []), ('public', ['halfvec', 'vector'])]
SELECT nspname, (SELECT count(*) FROM pg_type t WHERE t.typnamespace = n.oid AND t.typname IN ('vector', 'int8') AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = current_user AND nspname = 'public')) FROM pg_namespace n WHERE nspname IN ('public', 'pg_catalog') ORDER BY 1;
-- => [('pg_catalog', 0), ('public', 1)]
SELECT count(*) FROM pg_type WHERE typname = 'vector' AND EXISTS (SELECT 1 FROM pg_namespace WHERE oid = typnamespace);
-- => [(1,)]
SELECT (SELECT count(*) FROM pg_type WHERE nosuch = 1) FROM pg_namespace;
-- !! 42703
-- UPDATE and DELETE: a correlated subquery in SET and WHERE
UPDATE t SET name = (SELECT min(u.label) FROM u WHERE u.tk = t.k) WHERE t.id < 3;
SELECT id, name FROM t ORDER BY id;
-- => [(1, 'z'), (2, 'x'), (3, 'three'), (4, 'four')]
DELETE FROM t WHERE (SELECT count(*) FROM u WHERE u.tk = t.k) = 0;
SELECT id FROM t ORDER BY id;
-- => [(1,), (2,), (3,)]
-- bad input: an unknown relation, a subscript of a non-array, an array where a number goes
SELECT 'nosuch'::regclass;
-- !! 42P01
SELECT c.relname FROM pg_class c WHERE c.oid = 't'::regclass;
-- => [('t',)]
SELECT (id)[1] FROM t;
-- !! 42804
SELECT ARRAY(SELECT id FROM t) + 1;
-- !! 42883
SELECT array_to_string(5, ',');
-- !! 42883
-- relation sizes (their numbers are each engine's own; how they relate is PostgreSQL's),
-- and index builds in progress (none at the end of a statement here)
SELECT pg_relation_size('t') > 0, pg_relation_size('t_pkey') > 0, pg_indexes_size('t') > 0, pg_indexes_size('t_pkey'), pg_relation_size('t', 'fsm'), pg_relation_size('t', 'vm');
-- => [(True, True, True, 0, 0, 0)]
SELECT pg_total_relation_size('t') = pg_table_size('t') + pg_indexes_size('t'), pg_total_relation_size('t_pkey') = pg_relation_size('t_pkey'), pg_table_size('t') >= pg_relation_size('t');
-- => [(True, True, True)]
SELECT pg_relation_size(NULL::regclass), pg_relation_size('t', NULL), pg_size_pretty(pg_relation_size('t')) LIKE '% bytes';
-- => [(None, None, True)]
SELECT pg_relation_size('no_such_table');
-- !! 42P01
SELECT pg_relation_size('t', 'nofork');
-- !! 22023
SELECT pg_relation_size(1.5);
-- !! 42883
SELECT * FROM pg_stat_progress_create_index;
-- => []

-- a column named by schema, table and column, and = ANY (ARRAY[...]), as SQLAlchemy's
-- PostgreSQL dialect writes its catalog queries
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class WHERE pg_catalog.pg_class.relname = 't' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid);
-- => [('t',)]
SELECT pg_catalog.pg_namespace.nspname FROM pg_catalog.pg_namespace WHERE pg_catalog.pg_namespace.nspname = ANY (ARRAY['public', 'nothing']);
-- => [('public',)]
SELECT id FROM t WHERE k = ANY (ARRAY[10, 50]) ORDER BY id;
-- => [(1,)]
-- an alias hides its table's name: inside a subquery over the same table under an
-- alias, `ta` is the outer query's row (the subquery is correlated), and outside it
-- the aliased table is not `ta`
CREATE TABLE ta (id bigint PRIMARY KEY, g text, n int);
INSERT INTO ta VALUES (1, 'a', 1), (2, 'a', NULL), (3, 'b', 3), (4, NULL, 2), (5, 'b', 5), (6, 'c', 1);
SELECT id FROM ta WHERE EXISTS (SELECT 1 FROM ta AS x WHERE x.g = ta.g AND x.id <> ta.id) ORDER BY id;
-- => [(1,), (2,), (3,), (5,)]
SELECT id FROM ta WHERE NOT EXISTS (SELECT 1 FROM ta x WHERE x.g = ta.g AND x.id <> ta.id) ORDER BY id;
-- => [(4,), (6,)]
SELECT id, (SELECT count(*) FROM ta AS x WHERE x.g = ta.g) FROM ta ORDER BY id;
-- => [(1, 2), (2, 2), (3, 2), (4, 0), (5, 2), (6, 1)]
SELECT ta.id FROM ta AS x;
-- !! 42P01
SELECT id FROM ta AS x WHERE ta.id = 1;
-- !! 42P01
WITH w AS (SELECT id FROM ta) SELECT w.id FROM w AS x;
-- !! 42P01
SELECT generate_series.g FROM generate_series(1, 2) AS g;
-- !! 42P01
DELETE FROM ta AS x WHERE ta.id = 1;
-- !! 42P01
UPDATE ta AS x SET n = 0 WHERE ta.id = 1;
-- !! 42P01
UPDATE ta SET n = (SELECT count(*) FROM ta AS x WHERE x.g = ta.g) WHERE id < 3;
SELECT id, n FROM ta WHERE id < 3 ORDER BY id;
-- => [(1, 2), (2, 2)]
UPDATE ta SET n = 1 WHERE id = 1;
UPDATE ta SET n = NULL WHERE id = 2;

-- a bare name in a subquery is the innermost level's that has it: an enclosing
-- query's column where the subquery's own relations have none of that name
CREATE TABLE wm (id bigint PRIMARY KEY, m int);
INSERT INTO wm VALUES (1, 10), (2, 20), (3, 30);
CREATE TABLE kx (id bigint PRIMARY KEY, k int);
INSERT INTO kx VALUES (1, 1), (2, 2);
SELECT id FROM ta WHERE EXISTS (SELECT 1 FROM wm WHERE m > n * 10) ORDER BY id;
-- => [(1,), (4,), (6,)]
SELECT id, (SELECT count(*) FROM wm WHERE m >= n * 10) FROM ta ORDER BY id;
-- => [(1, 3), (2, 0), (3, 1), (4, 2), (5, 0), (6, 3)]
SELECT id, (SELECT count(*) FROM (SELECT m FROM wm) s WHERE m > n * 10) FROM ta ORDER BY id;
-- => [(1, 2), (2, 0), (3, 0), (4, 1), (5, 0), (6, 2)]
SELECT id, (SELECT max(m) FROM wm JOIN kx ON kx.id = wm.id WHERE k < n) FROM ta ORDER BY id;
-- => [(1, None), (2, None), (3, 20), (4, 10), (5, 20), (6, None)]
-- two levels out, one level out and its own, in one subquery
SELECT id FROM ta WHERE EXISTS (SELECT 1 FROM wm WHERE EXISTS (SELECT 1 FROM kx WHERE k = n AND k * 10 = m)) ORDER BY id;
-- => [(1,), (4,), (6,)]
-- an outer join's column, bare
SELECT ta.id, kx.k FROM ta, kx WHERE EXISTS (SELECT 1 FROM wm WHERE m = k * 10 AND n = k) ORDER BY 1;
-- => [(1, 1), (4, 2), (6, 1)]
-- its own column first: wm's id, not ta's
SELECT count(*) FROM ta WHERE EXISTS (SELECT 1 FROM wm WHERE id = 3);
-- => [(6,)]
SELECT id FROM ta WHERE EXISTS (SELECT 1 FROM wm WHERE nothing = 1);
-- !! 42703

-- x IN (an empty set) is false and x NOT IN (an empty set) true, for a NULL x too;
-- against a set with members a NULL x is unknown either way
SELECT id FROM ta WHERE n NOT IN (SELECT m FROM wm WHERE m > 100) ORDER BY id;
-- => [(1,), (2,), (3,), (4,), (5,), (6,)]
SELECT id, n IN (SELECT m FROM wm WHERE m > 100) FROM ta ORDER BY id;
-- => [(1, False), (2, False), (3, False), (4, False), (5, False), (6, False)]
SELECT count(*) FROM ta WHERE (n IN (SELECT m FROM wm WHERE false)) IS NULL;
-- => [(0,)]
SELECT id FROM ta WHERE NOT (n = ANY (ARRAY(SELECT m FROM wm WHERE m > 100))) ORDER BY id;
-- => [(1,), (2,), (3,), (4,), (5,), (6,)]
SELECT id FROM ta WHERE n NOT IN (SELECT m FROM wm) ORDER BY id;
-- => [(1,), (3,), (4,), (5,), (6,)]
SELECT count(*) FROM ta WHERE (n IN (SELECT m FROM wm)) IS NULL;
-- => [(1,)]

-- ... and in UPDATE and DELETE, a bare name the target table has
CREATE TABLE tu (id bigint PRIMARY KEY, g text, n int);
INSERT INTO tu VALUES (1, 'a', 1), (2, 'a', NULL), (3, 'b', 3), (4, NULL, 2);
UPDATE tu SET g = 'x' WHERE EXISTS (SELECT 1 FROM wm WHERE m = n * 10) RETURNING id;
-- => [(1,), (3,), (4,)]
UPDATE tu SET n = (SELECT max(m) FROM wm WHERE m > n * 10) WHERE id < 4 RETURNING id, n;
-- => [(1, 30), (2, None), (3, None)]
DELETE FROM tu WHERE NOT EXISTS (SELECT 1 FROM wm WHERE m >= n) RETURNING id;
-- => [(2,), (3,)]
SELECT id, g, n FROM tu ORDER BY id;
-- => [(1, 'x', 30), (4, 'x', 2)]

-- DEALLOCATE and DISCARD (what drivers and poolers send): a statement is a
-- connection's; none is kept here
DEALLOCATE ALL;
DEALLOCATE nothing_prepared;
-- !! 26000
DISCARD ALL;
DISCARD PLANS;
