-- A CHECK keeps its name: the one CONSTRAINT gave it, or PostgreSQL's (t_x_check for one
-- column, t_check for several, t_x_check1 where that is taken, in any table); a second
-- of one name is 42710; DROP CONSTRAINT drops it (42704 where there is none, IF EXISTS
-- goes on); dropping a column drops the constraints that read it. (contype 'p' and 'c':
-- PostgreSQL 18 lists NOT NULL constraints too, which 16's catalog has not.)
CREATE TABLE t (id bigint PRIMARY KEY, x int, y int, CONSTRAINT pos CHECK (x > 0),
    CHECK (y > 0), CHECK (x < 100 AND y < 100));
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 't'::regclass AND contype IN ('p', 'c') ORDER BY conname;
-- => [('pos', 'CHECK ((x > 0))'), ('t_check', 'CHECK (((x < 100) AND (y < 100)))'),
--     ('t_pkey', 'PRIMARY KEY (id)'), ('t_y_check', 'CHECK ((y > 0))')]
INSERT INTO t VALUES (1, 0, 0);
-- !! 23514
ALTER TABLE t ADD CONSTRAINT pos CHECK (x > 1);
-- !! 42710
ALTER TABLE t ADD CONSTRAINT t_pkey CHECK (x > 1);
-- !! 42710
ALTER TABLE t ADD CHECK (x > 1), ADD CHECK (x > 2);
ALTER TABLE t ADD CONSTRAINT q CHECK (y < 50), ADD CONSTRAINT q CHECK (y < 60);
-- !! 42710
SELECT conname FROM pg_constraint WHERE conrelid = 't'::regclass AND contype <> 'n'
    ORDER BY conname;
-- => [('pos',), ('t_check',), ('t_pkey',), ('t_x_check',), ('t_x_check1',), ('t_y_check',)]
ALTER TABLE t DROP CONSTRAINT pos;
INSERT INTO t VALUES (1, 3, 1);
ALTER TABLE t DROP CONSTRAINT pos;
-- !! 42704
ALTER TABLE t DROP CONSTRAINT IF EXISTS pos, DROP CONSTRAINT t_x_check1;
INSERT INTO t VALUES (2, 2, 1);
ALTER TABLE missing DROP CONSTRAINT pos;
-- !! 42P01
CREATE TABLE u (x int, CONSTRAINT c1 CHECK (x > 0), CONSTRAINT c1 CHECK (x < 9));
-- !! 42710
CREATE TABLE u (x int, CHECK (x > 0), CONSTRAINT u_x_check CHECK (x < 9));
-- !! 42710
CREATE TABLE v (x int, CONSTRAINT w_x_check CHECK (x > 0));
CREATE TABLE w (x int CHECK (x > 0) CHECK (x < 10));
SELECT conname FROM pg_constraint WHERE conrelid = 'w'::regclass ORDER BY conname;
-- => [('w_x_check1',), ('w_x_check2',)]
CREATE TABLE z (a int, b int, c int, CONSTRAINT both_ CHECK (a > 0 AND b > 0), CHECK (c > 0));
ALTER TABLE z DROP COLUMN a;
SELECT conname FROM pg_constraint WHERE conrelid = 'z'::regclass ORDER BY conname;
-- => [('z_c_check',)]
INSERT INTO z VALUES (-1, 1);
ALTER TABLE z ADD COLUMN d int CONSTRAINT z_c_check CHECK (d > 0);
-- !! 42710
ALTER TABLE z ADD COLUMN d int CONSTRAINT "Odd Name" CHECK (d > 0), ADD COLUMN e int CHECK (e > 0);
SELECT conname FROM pg_constraint WHERE conrelid = 'z'::regclass ORDER BY conname;
-- => [('Odd Name',), ('z_c_check',), ('z_e_check',)]
-- pg_get_constraintdef writes each constant as PostgreSQL deparses its literal
CREATE TABLE k (a int, f float, b boolean, t text, CHECK (a > -1), CHECK (f > 0),
    CHECK (f < 1.5), CHECK (f > -2.5), CHECK (b = true), CHECK (t <> 'it''s'),
    CHECK (a > 0 AND f IS NULL AND t <> 'y'), CHECK (f > -1), CHECK (a < 5000000000));
SELECT conname, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true)
    FROM pg_constraint WHERE conrelid = 'k'::regclass AND contype = 'c' ORDER BY conname;
-- => [('k_a_check', "CHECK ((a > '-1'::integer))", "CHECK (a > '-1'::integer)"),
--     ('k_a_check1', "CHECK ((a < '5000000000'::bigint))", "CHECK (a < '5000000000'::bigint)"),
--     ('k_b_check', 'CHECK ((b = true))', 'CHECK (b = true)'),
--     ('k_check', "CHECK (((a > 0) AND (f IS NULL) AND (t <> 'y'::text)))",
--      "CHECK (a > 0 AND f IS NULL AND t <> 'y'::text)"),
--     ('k_f_check', 'CHECK ((f > (0)::double precision))', 'CHECK (f > 0::double precision)'),
--     ('k_f_check1', 'CHECK ((f < (1.5)::double precision))',
--      'CHECK (f < 1.5::double precision)'),
--     ('k_f_check2', "CHECK ((f > ('-2.5'::numeric)::double precision))",
--      "CHECK (f > '-2.5'::numeric::double precision)"),
--     ('k_f_check3', "CHECK ((f > ('-1'::integer)::double precision))",
--      "CHECK (f > '-1'::integer::double precision)"),
--     ('k_t_check', "CHECK ((t <> 'it''s'::text))", "CHECK (t <> 'it''s'::text)")]
-- a constraint over several columns lists its conditions as written (not in the
-- columns' order), from CREATE TABLE and ALTER TABLE ADD alike
CREATE TABLE m (a int, b int, c text, CHECK (b > 0 AND a > 0),
    CONSTRAINT m_mixed CHECK (c <> 'x' AND a < 10 AND b < 10 AND c IS NOT NULL));
ALTER TABLE m ADD CHECK (b IS NOT NULL AND a < 100 AND b < 100);
SELECT conname, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true)
    FROM pg_constraint WHERE conrelid = 'm'::regclass AND contype = 'c' ORDER BY conname;
-- => [('m_check', 'CHECK (((b > 0) AND (a > 0)))', 'CHECK (b > 0 AND a > 0)'),
--     ('m_check1', 'CHECK (((b IS NOT NULL) AND (a < 100) AND (b < 100)))',
--      'CHECK (b IS NOT NULL AND a < 100 AND b < 100)'),
--     ('m_mixed', "CHECK (((c <> 'x'::text) AND (a < 10) AND (b < 10) AND (c IS NOT NULL)))",
--      "CHECK (c <> 'x'::text AND a < 10 AND b < 10 AND c IS NOT NULL)")]
INSERT INTO m VALUES (1, 1, 'x');
-- !! 23514
ALTER TABLE m DROP COLUMN c;
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 'm'::regclass AND contype = 'c' ORDER BY conname;
-- => [('m_check', 'CHECK (((b > 0) AND (a > 0)))'),
--     ('m_check1', 'CHECK (((b IS NOT NULL) AND (a < 100) AND (b < 100)))')]
