-- PostgreSQL's full-text search: to_tsvector, the tsquery constructors, @@, ts_rank,
-- ts_rank_cd (normalizations too), pgvector-python's hybrid-search example as written
-- (RRF of a vector top-20 and a keyword top-20; test_sql_fulltext.py runs it with an
-- index too), then matches through CREATE INDEX ... USING gin (to_tsvector(...)).
-- The corpus is ASCII words the two Snowball stemmers agree on.
CREATE TABLE documents (id bigint PRIMARY KEY, content text, embedding vector(3));
INSERT INTO documents (id, content, embedding) VALUES
    (1, 'Is paper in river lazy builds and foxes is reads was dog,', '[-0.649, 0.075, -0.389]'),
    (2, 'City small old lazy', '[-0.336, -0.656, -0.193]'),
    (3, 'Of in dog market cat singing jumped jumped walking sleeping new', '[-0.083, -0.479, 0.88]'),
    (4, 'Paper over in in brown brown reads green reads', '[-0.685, -0.542, 0.311]'),
    (5, 'Reads small paper over builds foxes under the!', '[-0.774, -0.32, -0.442]'),
    (6, 'Under trains with bright book.', '[0.406, 0.851, -0.268]'),
    (7, 'Over new train river singing the!', '[0.478, -0.508, -0.737]'),
    (8, 'Large rivers a sleeps houses is garden books was books,', '[-0.664, -0.574, -0.344]'),
    (9, 'Garden running books lazy jumped train?', '[0.442, 0.788, -0.147]'),
    (10, 'Was new walks gardens!', '[-0.611, 0.662, -0.497]'),
    (11, 'Cities brown dogs green train foxes bird?', '[-0.97, 0.859, -0.638]'),
    (12, 'Small quick in a,', '[-0.093, -0.776, 0.558]'),
    (13, 'With large large a trains over green brown.', '[-0.499, 0.299, 0.841]'),
    (14, 'Old dog builds singing over small markets cat quick garden old.', '[0.68, 0.213, 0.726]'),
    (15, 'New small trains under paper a it walks with dog river,', '[0.927, -0.927, 0.602]'),
    (16, 'Walking with cities of walking paper?', '[0.939, 0.861, 0.504]'),
    (17, 'Bright brown on new cat lazy train cities green is!', '[0.833, -0.479, 0.367]'),
    (18, 'Green was a cats it train.', '[0.4, -0.008, -0.609]'),
    (19, 'Running walks house on bird market cats cities green?', '[-0.637, 0.34, -0.355]'),
    (20, 'Green quiet builds books is river new quick cats books building city?', '[-0.862, -0.807, 0.831]'),
    (21, 'Singing jumped a houses jumps', '[-0.144, 0.165, 0.608]'),
    (22, 'Fox running reading cities house singing running!', '[0.42, -0.859, 0.332]'),
    (23, 'Houses garden sings rivers papers was garden small it of,', '[-0.002, -0.823, 0.586]'),
    (24, 'Was small sleeping reads singing reads they sleeps on a', '[0.439, -0.922, 0.445]'),
    (25, 'With the the lazy jumped markets running it jumped on', '[0.29, -0.383, 0.772]'),
    (26, 'Reads market running cities markets paper bird is quick,', '[-0.849, -0.494, -0.112]'),
    (27, 'New green a paper lazy it builds jumps river sleeps dogs.', '[0.457, 0.407, 0.092]'),
    (28, 'Dogs old with dog the city bright quick a was!', '[-0.962, -0.783, -0.537]'),
    (29, 'The paper large lazy fox city it house', '[-0.7, 0.102, 0.951]'),
    (30, 'Rivers large over river a under singing birds cities the!', '[0.941, -0.183, 0.22]'),
    (31, 'Is the jumped dogs old old it sleeping!', '[-0.022, -0.604, 0.02]'),
    (32, 'It brown small was paper on in cat paper!', '[0.658, 0.101, 0.35]'),
    (33, 'Garden large paper dogs sleeping of brown builds.', '[-0.927, 0.858, 0.045]'),
    (34, 'Rivers sleeping reading cats house over it rivers,', '[0.284, -0.87, 0.907]'),
    (35, 'Was walking brown a.', '[0.175, -0.291, -0.398]'),
    (36, 'Cat house cities lazy paper cats sleeping,', '[-0.878, 0.32, -0.242]'),
    (37, 'Over builds it reads garden large bird dogs papers and sleeping they,', '[0.423, -0.362, -0.291]'),
    (38, 'Rivers with building sings cats they', '[-0.265, -0.939, 0.333]'),
    (39, 'Jumped in was singing a', '[-0.92, -0.881, 0.884]'),
    (40, 'Train brown brown brown in old garden the brown dog', '[0.548, 0.026, -0.125]'),
    (41, 'Large was singing with over paper houses cat large.', '[-0.457, -0.552, -0.608]'),
    (42, 'A papers a they sings rivers reading quiet in,', '[0.302, 0.265, 0.18]'),
    (43, 'Bright dog old cat reads.', '[0.206, 0.521, 0.511]'),
    (44, 'Large cat cities market with green reads old cats,', '[-0.14, 0.735, -0.824]'),
    (45, 'New small houses books city city in small it they', '[-0.242, -0.559, -0.558]'),
    (46, 'Market garden market brown with train', '[-0.903, -0.295, -0.018]'),
    (47, 'Cats market walking new fox house jumps cats', '[0.887, 0.885, -0.226]'),
    (48, 'Garden jumps cities cats quiet dog', '[0.254, 0.418, 0.467]'),
    (49, 'Birds book houses dog with reading.', '[-0.84, -0.005, -0.463]'),
    (50, 'Market reads lazy gardens of reading new sleeping brown they', '[-0.348, -0.518, 0.505]'),
    (51, 'Jumped it runs bright birds river markets singing is jumps,', '[0.452, -0.495, 0.553]'),
    (52, 'Jumped new bird of large fox walks builds singing,', '[-0.188, 0.037, 0.481]'),
    (53, 'Walking foxes gardens brown book jumped with it is dog', '[0.207, -0.498, -0.097]'),
    (54, 'Cats new over reading quiet trains dogs quiet with brown building quick!', '[-0.463, -0.769, -0.198]'),
    (55, 'And running was dogs.', '[-0.65, -0.25, 0.906]'),
    (56, 'Over was brown papers with city', '[0.548, 0.339, -0.357]'),
    (57, 'Reading walks with market building they bird cats and?', '[0.624, 0.086, -0.677]'),
    (58, 'The city bird reads dogs small under city,', '[0.671, 0.72, 0.661]'),
    (59, 'They bird it cat river over', '[0.74, -0.747, 0.504]'),
    (60, 'Of garden over it foxes,', '[0.633, -0.871, -0.766]'),
    (61, 'It building over cities lazy dogs paper!', '[-0.798, -0.745, 0.215]'),
    (62, 'Singing lazy markets building,', '[-0.434, -0.912, 0.062]'),
    (63, 'And fox quiet city cities with old trains trains', '[0.16, -0.581, -0.957]'),
    (64, 'Under of markets house.', '[0.596, -0.293, -0.644]'),
    (65, 'Quiet birds trains cats quick markets?', '[0.389, -0.583, 0.554]'),
    (66, 'City the with train reading is dog old.', '[0.794, 0.719, 0.43]'),
    (67, 'River fox the sleeping small lazy lazy house dog', '[0.366, 0.592, -0.854]'),
    (68, 'It cat jumped is rivers of jumped paper lazy old bright papers', '[0.196, -0.89, -0.605]'),
    (69, 'Train running walks city sleeping birds birds market on train sleeps a?', '[0.548, 0.275, -0.119]'),
    (70, 'They large garden lazy under books reading is,', '[0.918, 0.929, -0.954]'),
    (71, 'A on in city new they quiet green green dog quick?', '[-0.223, -0.089, 0.608]'),
    (72, 'Of bright over river,', '[0.296, 0.229, -0.014]'),
    (73, 'New walking large gardens over of dogs.', '[0.241, -0.591, -0.834]'),
    (74, 'Fox old on cities?', '[0.824, -0.117, 0.459]'),
    (75, 'River sings gardens runs?', '[-0.997, 0.794, 0.901]'),
    (76, 'Quiet is it quiet,', '[0.133, -0.749, -0.85]'),
    (77, 'Walking reading sings and dogs and sings reads was?', '[0.505, -0.962, 0.024]'),
    (78, 'Market a large is trains,', '[0.473, -0.538, -0.269]'),
    (79, 'Garden jumped birds in books small cats train cats market sleeping,', '[-0.396, -0.007, -0.828]'),
    (80, 'Fox small cats quick rivers green is large walking!', '[0.177, 0.497, -0.818]');
SELECT id, to_tsvector('english', content) FROM documents ORDER BY id;
-- => [(1, "'build':6 'dog':12 'fox':8 'lazi':5 'paper':2 'read':10 'river':4"), (2, "'citi':1 'lazi':4 'old':3 'small':2"), (3, "'cat':5 'dog':3 'jump':7,8 'market':4 'new':11 'sing':6 'sleep':10 'walk':9"), (4, "'brown':5,6 'green':8 'paper':1 'read':7,9"), (5, "'build':5 'fox':6 'paper':3 'read':1 'small':2"), (6, "'book':5 'bright':4 'train':2"), (7, "'new':2 'river':4 'sing':5 'train':3"), (8, "'book':8,10 'garden':7 'hous':5 'larg':1 'river':2 'sleep':4"), (9, "'book':3 'garden':1 'jump':5 'lazi':4 'run':2 'train':6"), (10, "'garden':4 'new':2 'walk':3"), (11, "'bird':7 'brown':2 'citi':1 'dog':3 'fox':6 'green':4 'train':5"), (12, "'quick':2 'small':1"), (13, "'brown':8 'green':7 'larg':2,3 'train':5"), (14, "'build':3 'cat':8 'dog':2 'garden':10 'market':7 'old':1,11 'quick':9 'sing':4 'small':6"), (15, "'dog':10 'new':1 'paper':5 'river':11 'small':2 'train':3 'walk':8"), (16, "'citi':3 'paper':6 'walk':1,5"), (17, "'bright':1 'brown':2 'cat':5 'citi':8 'green':9 'lazi':6 'new':4 'train':7"), (18, "'cat':4 'green':1 'train':6"), (19, "'bird':5 'cat':7 'citi':8 'green':9 'hous':3 'market':6 'run':1 'walk':2"), (20, "'book':4,10 'build':3,11 'cat':9 'citi':12 'green':1 'new':7 'quick':8 'quiet':2 'river':6"), (21, "'hous':4 'jump':2,5 'sing':1"), (22, "'citi':4 'fox':1 'hous':5 'read':3 'run':2,7 'sing':6"), (23, "'garden':2,7 'hous':1 'paper':5 'river':4 'sing':3 'small':8"), (24, "'read':4,6 'sing':5 'sleep':3,8 'small':2"), (25, "'jump':5,9 'lazi':4 'market':6 'run':7"), (26, "'bird':7 'citi':4 'market':2,5 'paper':6 'quick':9 'read':1 'run':3"), (27, "'build':7 'dog':11 'green':2 'jump':8 'lazi':5 'new':1 'paper':4 'river':9 'sleep':10"), (28, "'bright':7 'citi':6 'dog':1,4 'old':2 'quick':8"), (29, "'citi':6 'fox':5 'hous':8 'larg':3 'lazi':4 'paper':2"), (30, "'bird':8 'citi':9 'larg':2 'river':1,4 'sing':7"), (31, "'dog':4 'jump':3 'old':5,6 'sleep':8"), (32, "'brown':2 'cat':8 'paper':5,9 'small':3"), (33, "'brown':7 'build':8 'dog':4 'garden':1 'larg':2 'paper':3 'sleep':5"), (34, "'cat':4 'hous':5 'read':3 'river':1,8 'sleep':2"), (35, "'brown':3 'walk':2"), (36, "'cat':1,6 'citi':3 'hous':2 'lazi':4 'paper':5 'sleep':7"), (37, "'bird':7 'build':2 'dog':8 'garden':5 'larg':6 'paper':9 'read':4 'sleep':11"), (38, "'build':3 'cat':5 'river':1 'sing':4"), (39, "'jump':1 'sing':4"), (40, "'brown':2,3,4,9 'dog':10 'garden':7 'old':6 'train':1"), (41, "'cat':8 'hous':7 'larg':1,9 'paper':6 'sing':3"), (42, "'paper':2 'quiet':8 'read':7 'river':6 'sing':5"), (43, "'bright':1 'cat':4 'dog':2 'old':3 'read':5"), (44, "'cat':2,9 'citi':3 'green':6 'larg':1 'market':4 'old':8 'read':7"), (45, "'book':4 'citi':5,6 'hous':3 'new':1 'small':2,8"), (46, "'brown':4 'garden':2 'market':1,3 'train':6"), (47, "'cat':1,8 'fox':5 'hous':6 'jump':7 'market':2 'new':4 'walk':3"), (48, "'cat':4 'citi':3 'dog':6 'garden':1 'jump':2 'quiet':5"), (49, "'bird':1 'book':2 'dog':4 'hous':3 'read':6"), (50, "'brown':9 'garden':4 'lazi':3 'market':1 'new':7 'read':2,6 'sleep':8"), (51, "'bird':5 'bright':4 'jump':1,10 'market':7 'river':6 'run':3 'sing':8"), (52, "'bird':3 'build':8 'fox':6 'jump':1 'larg':5 'new':2 'sing':9 'walk':7"), (53, "'book':5 'brown':4 'dog':10 'fox':2 'garden':3 'jump':6 'walk':1"), (54, "'brown':10 'build':11 'cat':1 'dog':7 'new':2 'quick':12 'quiet':5,8 'read':4 'train':6"), (55, "'dog':4 'run':2"), (56, "'brown':3 'citi':6 'paper':4"), (57, "'bird':7 'build':5 'cat':8 'market':4 'read':1 'walk':2"), (58, "'bird':3 'citi':2,8 'dog':5 'read':4 'small':6"), (59, "'bird':2 'cat':4 'river':5"), (60, "'fox':5 'garden':2"), (61, "'build':2 'citi':4 'dog':6 'lazi':5 'paper':7"), (62, "'build':4 'lazi':2 'market':3 'sing':1"), (63, "'citi':4,5 'fox':2 'old':7 'quiet':3 'train':8,9"), (64, "'hous':4 'market':3"), (65, "'bird':2 'cat':4 'market':6 'quick':5 'quiet':1 'train':3"), (66, "'citi':1 'dog':7 'old':8 'read':5 'train':4"), (67, "'dog':9 'fox':2 'hous':8 'lazi':6,7 'river':1 'sleep':4 'small':5"), (68, "'bright':11 'cat':2 'jump':3,7 'lazi':9 'old':10 'paper':8,12 'river':5"), (69, "'bird':6,7 'citi':4 'market':8 'run':2 'sleep':5,11 'train':1,10 'walk':3"), (70, "'book':6 'garden':3 'larg':2 'lazi':4 'read':7"), (71, "'citi':4 'dog':10 'green':8,9 'new':5 'quick':11 'quiet':7"), (72, "'bright':2 'river':4"), (73, "'dog':7 'garden':4 'larg':3 'new':1 'walk':2"), (74, "'citi':4 'fox':1 'old':2"), (75, "'garden':3 'river':1 'run':4 'sing':2"), (76, "'quiet':1,4"), (77, "'dog':5 'read':2,8 'sing':3,7 'walk':1"), (78, "'larg':3 'market':1 'train':5"), (79, "'bird':3 'book':5 'cat':7,9 'garden':1 'jump':2 'market':10 'sleep':11 'small':6 'train':8"), (80, "'cat':3 'fox':1 'green':6 'larg':8 'quick':4 'river':5 'small':2 'walk':9")]
SELECT id, to_tsvector('simple', content) FROM documents WHERE id <= 10 ORDER BY id;
-- => [(1, "'and':7 'builds':6 'dog':12 'foxes':8 'in':3 'is':1,9 'lazy':5 'paper':2 'reads':10 'river':4 'was':11"), (2, "'city':1 'lazy':4 'old':3 'small':2"), (3, "'cat':5 'dog':3 'in':2 'jumped':7,8 'market':4 'new':11 'of':1 'singing':6 'sleeping':10 'walking':9"), (4, "'brown':5,6 'green':8 'in':3,4 'over':2 'paper':1 'reads':7,9"), (5, "'builds':5 'foxes':6 'over':4 'paper':3 'reads':1 'small':2 'the':8 'under':7"), (6, "'book':5 'bright':4 'trains':2 'under':1 'with':3"), (7, "'new':2 'over':1 'river':4 'singing':5 'the':6 'train':3"), (8, "'a':3 'books':8,10 'garden':7 'houses':5 'is':6 'large':1 'rivers':2 'sleeps':4 'was':9"), (9, "'books':3 'garden':1 'jumped':5 'lazy':4 'running':2 'train':6"), (10, "'gardens':4 'new':2 'walks':3 'was':1")]
SELECT to_tsvector('english', 'The quick brown foxes jumped over the lazy dogs'' backs, they said: 42 times'), to_tsvector(''), to_tsvector('english', NULL);
-- => [("'42':13 'back':10 'brown':3 'dog':9 'fox':4 'jump':5 'lazi':8 'quick':2 'said':12 'time':14", '', None)]
SELECT to_tsvector('fox fox the fox'), to_tsvector('simple', 'Fox fox THE fox');
-- => [("'fox':1,2,4", "'fox':1,2,4 'the':3")]
SELECT to_tsquery('english', 'cats & dogs');
-- => [("'cat' & 'dog'",)]
SELECT to_tsquery('english', 'running | !jumped');
-- => [("'run' | !'jump'",)]
SELECT to_tsquery('english', '(quick | lazy) & fox:*');
-- => [("( 'quick' | 'lazi' ) & 'fox':*",)]
SELECT to_tsquery('english', 'quick <-> brown');
-- => [("'quick' <-> 'brown'",)]
SELECT to_tsquery('english', 'quick <2> fox');
-- => [("'quick' <2> 'fox'",)]
SELECT to_tsquery('english', 'the <-> quick <-> of <-> fox');
-- => [("'quick' <2> 'fox'",)]
SELECT to_tsquery('english', '!(cats | dogs) & river');
-- => [("!( 'cat' | 'dog' ) & 'river'",)]
SELECT to_tsquery('english', 'a <-> (b <-> c)');
-- => [("'b' <-> 'c'",)]
SELECT to_tsquery('simple', 'The & Cats');
-- => [("'the' & 'cats'",)]
SELECT to_tsquery('english', 'the');
-- => [('',)]
SELECT plainto_tsquery('english', 'The Quick brown foxes!');
-- => [("'quick' & 'brown' & 'fox'",)]
SELECT plainto_tsquery('simple', 'The Quick brown foxes!');
-- => [("'the' & 'quick' & 'brown' & 'foxes'",)]
SELECT plainto_tsquery('english', 'of the');
-- => [('',)]
SELECT phraseto_tsquery('english', 'the dogs of the city');
-- => [("'dog' <3> 'citi'",)]
SELECT websearch_to_tsquery('english', '"quick fox" or lazy -dogs');
-- => [("'quick' <-> 'fox' | 'lazi' & !'dog'",)]
SELECT websearch_to_tsquery('english', 'reading books');
-- => [("'read' & 'book'",)]
SELECT to_tsquery('cats & dogs'), plainto_tsquery('houses of the cities');
-- => [("'cat' & 'dog'", "'hous' & 'citi'")]
SELECT 'Fat & (rats | !cats)'::tsquery, to_tsvector('english', 'fat cats') @@ 'cat', to_tsvector('english', 'The Cats') @@ 'Cats'::tsquery, to_tsvector('english', 'fat rats') @@ 'rat & fat'::tsquery;
-- => [("'Fat' & ( 'rats' | !'cats' )", True, False, True)]
SELECT 'the fat rats'::text @@ 'rats', 'fat rats' @@ to_tsquery('english', 'rats'), to_tsvector('simple', 'a b') @@ to_tsquery('english'::regconfig, 'b');
-- => [(True, True, True)]
SELECT id FROM documents WHERE content @@ 'quick brown' ORDER BY id;
-- => [(54,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats & dogs') ORDER BY id;
-- => [(3,), (14,), (43,), (48,), (54,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cat | river') ORDER BY id;
-- => [(1,), (3,), (7,), (8,), (14,), (15,), (17,), (18,), (19,), (20,), (23,), (27,), (30,), (32,), (34,), (36,), (38,), (41,), (42,), (43,), (44,), (47,), (48,), (51,), (54,), (57,), (59,), (65,), (67,), (68,), (72,), (75,), (79,), (80,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', '!garden & book') ORDER BY id;
-- => [(6,), (20,), (45,), (49,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'quick <-> fox') ORDER BY id;
-- => []
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'lazy <2> dogs') ORDER BY id;
-- => [(67,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'run:* & (city | market)') ORDER BY id;
-- => [(19,), (22,), (25,), (26,), (51,), (69,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'bird & !sing') ORDER BY id;
-- => [(11,), (19,), (26,), (37,), (49,), (57,), (58,), (59,), (65,), (69,), (79,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'houses') ORDER BY id;
-- => [(8,), (19,), (21,), (22,), (23,), (29,), (34,), (36,), (41,), (45,), (47,), (49,), (64,), (67,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'brown <-> (foxes <-> jumped)') ORDER BY id;
-- => []
SELECT id FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'read:* | sleeping') ORDER BY id;
-- => [(1,), (3,), (4,), (5,), (8,), (22,), (24,), (26,), (27,), (31,), (33,), (34,), (36,), (37,), (42,), (43,), (44,), (49,), (50,), (54,), (57,), (58,), (66,), (67,), (69,), (70,), (77,), (79,)]
SELECT id FROM documents, plainto_tsquery('english', 'quick brown dogs') query WHERE to_tsvector('english', content) @@ query ORDER BY id;
-- => [(54,)]
SELECT id FROM documents WHERE to_tsquery('english', 'river & garden') @@ to_tsvector('english', content) ORDER BY id;
-- => [(8,), (23,), (75,)]
SELECT id FROM documents WHERE content @@ to_tsquery('english', 'markets & city') ORDER BY id;
-- => [(19,), (26,), (44,), (69,)]
SELECT count(*) FROM documents WHERE to_tsvector('english', content) @@ plainto_tsquery('english', 'the of');
-- => [(0,)]
SELECT id FROM documents WHERE to_tsvector('english', content) @@ websearch_to_tsquery('english', '"lazy dog" or -cats river') ORDER BY id;
-- => [(1,), (7,), (8,), (15,), (23,), (27,), (30,), (42,), (51,), (61,), (67,), (72,), (75,)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats & dogs')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats & dogs')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats & dogs') ORDER BY id;
-- => [(3, 0.098500855, 0.05), (14, 0.085297264, 0.016666668), (43, 0.098500855, 0.05), (48, 0.098500855, 0.05), (54, 0.085297264, 0.016666668)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cat | river | book')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cat | river | book')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cat | river | book') ORDER BY id;
-- => [(1, 0.020264236, 0.1), (3, 0.020264236, 0.1), (6, 0.020264236, 0.1), (7, 0.020264236, 0.1), (8, 0.045594532, 0.3), (9, 0.020264236, 0.1), (14, 0.020264236, 0.1), (15, 0.020264236, 0.1), (17, 0.020264236, 0.1), (18, 0.020264236, 0.1), (19, 0.020264236, 0.1), (20, 0.065858774, 0.4), (23, 0.020264236, 0.1), (27, 0.020264236, 0.1), (30, 0.025330296, 0.2), (32, 0.020264236, 0.1), (34, 0.045594532, 0.3), (36, 0.025330296, 0.2), (38, 0.040528473, 0.2), (41, 0.020264236, 0.1), (42, 0.020264236, 0.1), (43, 0.020264236, 0.1), (44, 0.025330296, 0.2), (45, 0.020264236, 0.1), (47, 0.025330296, 0.2), (48, 0.020264236, 0.1), (49, 0.020264236, 0.1), (51, 0.020264236, 0.1), (53, 0.020264236, 0.1), (54, 0.020264236, 0.1), (57, 0.020264236, 0.1), (59, 0.040528473, 0.2), (65, 0.020264236, 0.1), (67, 0.020264236, 0.1), (68, 0.040528473, 0.2), (70, 0.020264236, 0.1), (72, 0.020264236, 0.1), (75, 0.020264236, 0.1), (79, 0.045594532, 0.3), (80, 0.040528473, 0.2)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'quick & brown & fox')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'quick & brown & fox')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'quick & brown & fox') ORDER BY id;
-- => []
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', '!garden & book')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', '!garden & book')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', '!garden & book') ORDER BY id;
-- => [(6, 1e-20, 0.1), (20, 1e-20, 0.2), (45, 1e-20, 0.1), (49, 1e-20, 0.1)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'run:* & city')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'run:* & city')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'run:* & city') ORDER BY id;
-- => [(19, 0.07614762, 0.014285714), (22, 0.18626945, 0.083333336), (26, 0.09910322, 0.1), (69, 0.098500855, 0.05)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'houses')), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'houses')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'houses') ORDER BY id;
-- => [(8, 0.06079271, 0.1), (19, 0.06079271, 0.1), (21, 0.06079271, 0.1), (22, 0.06079271, 0.1), (23, 0.06079271, 0.1), (29, 0.06079271, 0.1), (34, 0.06079271, 0.1), (36, 0.06079271, 0.1), (41, 0.06079271, 0.1), (45, 0.06079271, 0.1), (47, 0.06079271, 0.1), (49, 0.06079271, 0.1), (64, 0.06079271, 0.1), (67, 0.06079271, 0.1)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 1), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 1) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.0135094905, 0.09617967), (3, 0.012200286, 0.0868589), (7, 0.008727332, 0.062133495), (8, 0.0067547453, 0.048089836), (11, 0.0067547453, 0.048089836), (14, 0.011715356, 0.08340648), (15, 0.0135094905, 0.09617967), (17, 0.006392655, 0.04551196), (18, 0.010132118, 0.072134756), (19, 0.006392655, 0.04551196), (20, 0.011305132, 0.080485925), (23, 0.0067547453, 0.048089836), (27, 0.012200286, 0.0868589), (28, 0.009022834, 0.10277967), (30, 0.009022834, 0.10277967), (31, 0.007839276, 0.055811062), (32, 0.007839276, 0.055811062), (33, 0.0067547453, 0.048089836), (34, 0.0162411, 0.1541695), (36, 0.008443432, 0.09617967), (37, 0.006392655, 0.04551196), (38, 0.017454663, 0.12426699), (40, 0.006392655, 0.04551196), (41, 0.0072182664, 0.051389836), (42, 0.007839276, 0.055811062), (43, 0.015678553, 0.111622125), (44, 0.0079908185, 0.09102392), (47, 0.0079908185, 0.09102392), (48, 0.014436533, 0.10277967), (49, 0.007839276, 0.055811062), (51, 0.006392655, 0.04551196), (53, 0.0067547453, 0.048089836), (54, 0.011715356, 0.08340648), (55, 0.01278531, 0.09102392), (57, 0.0072182664, 0.051389836), (58, 0.0072182664, 0.051389836), (59, 0.020264236, 0.14426951), (61, 0.007839276, 0.055811062), (65, 0.0072182664, 0.051389836), (66, 0.007839276, 0.055811062), (67, 0.01278531, 0.09102392), (68, 0.012200286, 0.0868589), (71, 0.0067547453, 0.048089836), (72, 0.01278531, 0.09102392), (73, 0.007839276, 0.055811062), (75, 0.008727332, 0.062133495), (77, 0.0072182664, 0.051389836), (79, 0.0073220977, 0.08340648), (80, 0.01278531, 0.09102392)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 2), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 2) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.005789782, 0.028571429), (3, 0.0045031635, 0.022222223), (7, 0.005066059, 0.025), (8, 0.002894891, 0.014285714), (11, 0.002894891, 0.014285714), (14, 0.004052847, 0.02), (15, 0.005789782, 0.028571429), (17, 0.0025330295, 0.0125), (18, 0.0067547453, 0.033333335), (19, 0.0025330295, 0.0125), (20, 0.0036844066, 0.018181818), (23, 0.002894891, 0.014285714), (27, 0.0045031635, 0.022222223), (28, 0.004221716, 0.033333335), (30, 0.004221716, 0.033333335), (31, 0.004052847, 0.02), (32, 0.004052847, 0.02), (33, 0.002894891, 0.014285714), (34, 0.007599089, 0.05), (36, 0.0036186136, 0.028571429), (37, 0.0025330295, 0.0125), (38, 0.010132118, 0.05), (40, 0.0025330295, 0.0125), (41, 0.0033773726, 0.016666668), (42, 0.004052847, 0.02), (43, 0.008105694, 0.04), (44, 0.003166287, 0.025), (47, 0.003166287, 0.025), (48, 0.0067547453, 0.033333335), (49, 0.004052847, 0.02), (51, 0.0025330295, 0.0125), (53, 0.002894891, 0.014285714), (54, 0.004052847, 0.02), (55, 0.010132118, 0.05), (57, 0.0033773726, 0.016666668), (58, 0.0033773726, 0.016666668), (59, 0.0135094905, 0.06666667), (61, 0.004052847, 0.02), (65, 0.0033773726, 0.016666668), (66, 0.004052847, 0.02), (67, 0.005066059, 0.025), (68, 0.0045031635, 0.022222223), (71, 0.002894891, 0.014285714), (72, 0.010132118, 0.05), (73, 0.004052847, 0.02), (75, 0.005066059, 0.025), (77, 0.0033773726, 0.016666668), (79, 0.0025330295, 0.02), (80, 0.005066059, 0.025)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 4), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 4) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.040528473, 0.0125), (3, 0.040528473, 0.05), (7, 0.020264236, 0.1), (8, 0.020264236, 0.1), (11, 0.020264236, 0.1), (14, 0.040528473, 0.016666668), (15, 0.040528473, 0.1), (17, 0.020264236, 0.1), (18, 0.020264236, 0.1), (19, 0.020264236, 0.1), (20, 0.040528473, 0.033333335), (23, 0.020264236, 0.1), (27, 0.040528473, 0.05), (28, 0.025330296, 0.033333335), (30, 0.025330296, 0.033333335), (31, 0.020264236, 0.1), (32, 0.020264236, 0.1), (33, 0.020264236, 0.1), (34, 0.045594532, 0.058333334), (36, 0.025330296, 0.02), (37, 0.020264236, 0.1), (38, 0.040528473, 0.025), (40, 0.020264236, 0.1), (41, 0.020264236, 0.1), (42, 0.020264236, 0.1), (43, 0.040528473, 0.05), (44, 0.025330296, 0.014285714), (47, 0.025330296, 0.014285714), (48, 0.040528473, 0.05), (49, 0.020264236, 0.1), (51, 0.020264236, 0.1), (53, 0.020264236, 0.1), (54, 0.040528473, 0.016666668), (55, 0.020264236, 0.1), (57, 0.020264236, 0.1), (58, 0.020264236, 0.1), (59, 0.040528473, 0.1), (61, 0.020264236, 0.1), (65, 0.020264236, 0.1), (66, 0.020264236, 0.1), (67, 0.040528473, 0.0125), (68, 0.040528473, 0.033333335), (71, 0.020264236, 0.1), (72, 0.020264236, 0.1), (73, 0.020264236, 0.1), (75, 0.020264236, 0.1), (77, 0.020264236, 0.1), (79, 0.025330296, 0.05), (80, 0.040528473, 0.05)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 8), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 8) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.005789782, 0.028571429), (3, 0.005066059, 0.025), (7, 0.005066059, 0.025), (8, 0.0033773726, 0.016666668), (11, 0.002894891, 0.014285714), (14, 0.0045031635, 0.022222223), (15, 0.005789782, 0.028571429), (17, 0.0025330295, 0.0125), (18, 0.0067547453, 0.033333335), (19, 0.0025330295, 0.0125), (20, 0.0045031635, 0.022222223), (23, 0.0033773726, 0.016666668), (27, 0.0045031635, 0.022222223), (28, 0.005066059, 0.04), (30, 0.005066059, 0.04), (31, 0.005066059, 0.025), (32, 0.005066059, 0.025), (33, 0.002894891, 0.014285714), (34, 0.009118906, 0.060000002), (36, 0.004221716, 0.033333335), (37, 0.0025330295, 0.0125), (38, 0.010132118, 0.05), (40, 0.004052847, 0.02), (41, 0.004052847, 0.02), (42, 0.004052847, 0.02), (43, 0.008105694, 0.04), (44, 0.0036186136, 0.028571429), (47, 0.0036186136, 0.028571429), (48, 0.0067547453, 0.033333335), (49, 0.004052847, 0.02), (51, 0.002894891, 0.014285714), (53, 0.002894891, 0.014285714), (54, 0.0045031635, 0.022222223), (55, 0.010132118, 0.05), (57, 0.0033773726, 0.016666668), (58, 0.004052847, 0.02), (59, 0.0135094905, 0.06666667), (61, 0.004052847, 0.02), (65, 0.0033773726, 0.016666668), (66, 0.004052847, 0.02), (67, 0.005789782, 0.028571429), (68, 0.005789782, 0.028571429), (71, 0.0033773726, 0.016666668), (72, 0.010132118, 0.05), (73, 0.004052847, 0.02), (75, 0.005066059, 0.025), (77, 0.005066059, 0.025), (79, 0.0028144773, 0.022222223), (80, 0.005066059, 0.025)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 16), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 16) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.0135094905, 0.06666667), (3, 0.01278531, 0.06309298), (7, 0.008727332, 0.043067656), (8, 0.0072182664, 0.03562072), (11, 0.0067547453, 0.033333335), (14, 0.012200286, 0.060206), (15, 0.0135094905, 0.06666667), (17, 0.006392655, 0.03154649), (18, 0.010132118, 0.05), (19, 0.006392655, 0.03154649), (20, 0.012200286, 0.060206), (23, 0.0072182664, 0.03562072), (27, 0.012200286, 0.060206), (28, 0.009799096, 0.07737056), (30, 0.009799096, 0.07737056), (31, 0.008727332, 0.043067656), (32, 0.008727332, 0.043067656), (33, 0.0067547453, 0.033333335), (34, 0.017638372, 0.116055846), (36, 0.009022834, 0.07124144), (37, 0.006392655, 0.03154649), (38, 0.017454663, 0.08613531), (40, 0.007839276, 0.03868528), (41, 0.007839276, 0.03868528), (42, 0.007839276, 0.03868528), (43, 0.015678553, 0.07737056), (44, 0.008443432, 0.06666667), (47, 0.008443432, 0.06666667), (48, 0.014436533, 0.07124144), (49, 0.007839276, 0.03868528), (51, 0.0067547453, 0.033333335), (53, 0.0067547453, 0.033333335), (54, 0.012200286, 0.060206), (55, 0.01278531, 0.06309298), (57, 0.0072182664, 0.03562072), (58, 0.007839276, 0.03868528), (59, 0.020264236, 0.1), (61, 0.007839276, 0.03868528), (65, 0.0072182664, 0.03562072), (66, 0.007839276, 0.03868528), (67, 0.0135094905, 0.06666667), (68, 0.0135094905, 0.06666667), (71, 0.0072182664, 0.03562072), (72, 0.01278531, 0.06309298), (73, 0.007839276, 0.03868528), (75, 0.008727332, 0.043067656), (77, 0.008727332, 0.043067656), (79, 0.007625179, 0.060206), (80, 0.01278531, 0.06309298)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 32), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 32) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.038949896, 0.16666667), (3, 0.038949896, 0.16666667), (7, 0.019861752, 0.09090909), (8, 0.019861752, 0.09090909), (11, 0.019861752, 0.09090909), (14, 0.038949896, 0.16666667), (15, 0.038949896, 0.16666667), (17, 0.019861752, 0.09090909), (18, 0.019861752, 0.09090909), (19, 0.019861752, 0.09090909), (20, 0.038949896, 0.16666667), (23, 0.019861752, 0.09090909), (27, 0.038949896, 0.16666667), (28, 0.024704523, 0.16666667), (30, 0.024704523, 0.16666667), (31, 0.019861752, 0.09090909), (32, 0.019861752, 0.09090909), (33, 0.019861752, 0.09090909), (34, 0.043606322, 0.23076923), (36, 0.024704523, 0.16666667), (37, 0.019861752, 0.09090909), (38, 0.038949896, 0.16666667), (40, 0.019861752, 0.09090909), (41, 0.019861752, 0.09090909), (42, 0.019861752, 0.09090909), (43, 0.038949896, 0.16666667), (44, 0.024704523, 0.16666667), (47, 0.024704523, 0.16666667), (48, 0.038949896, 0.16666667), (49, 0.019861752, 0.09090909), (51, 0.019861752, 0.09090909), (53, 0.019861752, 0.09090909), (54, 0.038949896, 0.16666667), (55, 0.019861752, 0.09090909), (57, 0.019861752, 0.09090909), (58, 0.019861752, 0.09090909), (59, 0.038949896, 0.16666667), (61, 0.019861752, 0.09090909), (65, 0.019861752, 0.09090909), (66, 0.019861752, 0.09090909), (67, 0.038949896, 0.16666667), (68, 0.038949896, 0.16666667), (71, 0.019861752, 0.09090909), (72, 0.019861752, 0.09090909), (73, 0.019861752, 0.09090909), (75, 0.019861752, 0.09090909), (77, 0.019861752, 0.09090909), (79, 0.024704523, 0.16666667), (80, 0.038949896, 0.16666667)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 3), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 3) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.0019299273, 0.013739953), (3, 0.0013555873, 0.0096509885), (7, 0.002181833, 0.015533374), (8, 0.00096496363, 0.0068699764), (11, 0.00096496363, 0.0068699764), (14, 0.0011715356, 0.008340648), (15, 0.0019299273, 0.013739953), (17, 0.00079908187, 0.005688995), (18, 0.0033773726, 0.024044918), (19, 0.00079908187, 0.005688995), (20, 0.0010277393, 0.007316902), (23, 0.00096496363, 0.0068699764), (27, 0.0013555873, 0.0096509885), (28, 0.0015038056, 0.017129945), (30, 0.0015038056, 0.017129945), (31, 0.0015678552, 0.011162213), (32, 0.0015678552, 0.011162213), (33, 0.00096496363, 0.0068699764), (34, 0.00270685, 0.025694918), (36, 0.0012062045, 0.013739953), (37, 0.00079908187, 0.005688995), (38, 0.004363666, 0.031066747), (40, 0.00079908187, 0.005688995), (41, 0.0012030444, 0.008564972), (42, 0.0015678552, 0.011162213), (43, 0.0031357105, 0.022324426), (44, 0.0009988523, 0.01137799), (47, 0.0009988523, 0.01137799), (48, 0.0024060889, 0.017129945), (49, 0.0015678552, 0.011162213), (51, 0.00079908187, 0.005688995), (53, 0.00096496363, 0.0068699764), (54, 0.0011715356, 0.008340648), (55, 0.006392655, 0.04551196), (57, 0.0012030444, 0.008564972), (58, 0.0012030444, 0.008564972), (59, 0.0067547453, 0.048089836), (61, 0.0015678552, 0.011162213), (65, 0.0012030444, 0.008564972), (66, 0.0015678552, 0.011162213), (67, 0.0015981637, 0.01137799), (68, 0.0013555873, 0.0096509885), (71, 0.00096496363, 0.0068699764), (72, 0.006392655, 0.04551196), (73, 0.0015678552, 0.011162213), (75, 0.002181833, 0.015533374), (77, 0.0012030444, 0.008564972), (79, 0.00073220977, 0.008340648), (80, 0.0015981637, 0.01137799)]
SELECT id, ts_rank(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 12), ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'cats | river | dog'), 12) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'cats | river | dog') ORDER BY id;
-- => [(1, 0.005789782, 0.0017857143), (3, 0.005066059, 0.00625), (7, 0.005066059, 0.025), (8, 0.0033773726, 0.016666668), (11, 0.002894891, 0.014285714), (14, 0.0045031635, 0.0018518519), (15, 0.005789782, 0.014285714), (17, 0.0025330295, 0.0125), (18, 0.0067547453, 0.033333335), (19, 0.0025330295, 0.0125), (20, 0.0045031635, 0.0037037039), (23, 0.0033773726, 0.016666668), (27, 0.0045031635, 0.0055555557), (28, 0.005066059, 0.006666667), (30, 0.005066059, 0.006666667), (31, 0.005066059, 0.025), (32, 0.005066059, 0.025), (33, 0.002894891, 0.014285714), (34, 0.009118906, 0.011666667), (36, 0.004221716, 0.0033333334), (37, 0.0025330295, 0.0125), (38, 0.010132118, 0.00625), (40, 0.004052847, 0.02), (41, 0.004052847, 0.02), (42, 0.004052847, 0.02), (43, 0.008105694, 0.01), (44, 0.0036186136, 0.0020408165), (47, 0.0036186136, 0.0020408165), (48, 0.0067547453, 0.008333334), (49, 0.004052847, 0.02), (51, 0.002894891, 0.014285714), (53, 0.002894891, 0.014285714), (54, 0.0045031635, 0.0018518519), (55, 0.010132118, 0.05), (57, 0.0033773726, 0.016666668), (58, 0.004052847, 0.02), (59, 0.0135094905, 0.033333335), (61, 0.004052847, 0.02), (65, 0.0033773726, 0.016666668), (66, 0.004052847, 0.02), (67, 0.005789782, 0.0017857143), (68, 0.005789782, 0.004761905), (71, 0.0033773726, 0.016666668), (72, 0.010132118, 0.05), (73, 0.004052847, 0.02), (75, 0.005066059, 0.025), (77, 0.005066059, 0.025), (79, 0.0028144773, 0.0055555557), (80, 0.005066059, 0.00625)]
SELECT id, ts_rank('{0.5, 0.2, 0.4, 1.0}', to_tsvector('english', content), plainto_tsquery('english', 'quick fox')), ts_rank_cd('{0.2, 0.2, 0.4, 1.0}', to_tsvector('english', content), plainto_tsquery('english', 'quick fox'), 2) FROM documents WHERE to_tsvector('english', content) @@ plainto_tsquery('english', 'quick fox') ORDER BY id;
-- => [(80, 0.4867924, 0.008333334)]
SELECT ts_rank(to_tsvector('english', 'a fat cat sat on a mat and ate a fat rat'), to_tsquery('english', 'fat & rat')), ts_rank_cd(to_tsvector('english', 'a fat cat sat on a mat and ate a fat rat'), to_tsquery('english', 'fat & rat')), ts_rank(to_tsvector('english', 'fat'), to_tsquery('english', 'fat & rat')), ts_rank(to_tsvector(''), to_tsquery('english', 'fat'));
-- => [(0.13493292, 0.1, 1e-20, 0.0)]
WITH semantic_search AS (
    SELECT id, RANK () OVER (ORDER BY embedding <=> '[0.7,0.7,0.1]') AS rank
    FROM documents ORDER BY embedding <=> '[0.7,0.7,0.1]' LIMIT 20
), keyword_search AS (
    SELECT id, RANK () OVER (ORDER BY ts_rank_cd(to_tsvector('english', content), query) DESC)
    FROM documents, plainto_tsquery('english', 'lazy dogs') query
    WHERE to_tsvector('english', content) @@ query
    ORDER BY ts_rank_cd(to_tsvector('english', content), query) DESC LIMIT 20
)
SELECT COALESCE(semantic_search.id, keyword_search.id) AS id,
    COALESCE(1.0 / (60 + semantic_search.rank), 0.0) +
    COALESCE(1.0 / (60 + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
ORDER BY score DESC LIMIT 5;
-- => [(27, 0.032266458495966696), (67, 0.028629032258064516), (61, 0.01639344262295082), (72, 0.016129032258064516), (47, 0.015873015873015872)]
CREATE INDEX ON documents USING GIN (to_tsvector('english', content));
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'market & !cities')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'market & !cities') ORDER BY id;
-- => [(3, 0.1), (14, 0.1), (25, 0.1), (46, 0.2), (47, 0.1), (50, 0.1), (51, 0.1), (57, 0.1), (62, 0.1), (64, 0.1), (65, 0.1), (78, 0.1), (79, 0.1)]
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'garden | house')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'garden | house') ORDER BY id;
-- => [(8, 0.2), (9, 0.1), (10, 0.1), (14, 0.1), (19, 0.1), (21, 0.1), (22, 0.1), (23, 0.3), (29, 0.1), (33, 0.1), (34, 0.1), (36, 0.1), (37, 0.1), (40, 0.1), (41, 0.1), (45, 0.1), (46, 0.1), (47, 0.1), (48, 0.1), (49, 0.1), (50, 0.1), (53, 0.1), (60, 0.1), (64, 0.1), (67, 0.1), (70, 0.1), (73, 0.1), (75, 0.1), (79, 0.1)]
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'bright <-> train:*')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'bright <-> train:*') ORDER BY id;
-- => []
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'jump:* & (fox | dog)')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'jump:* & (fox | dog)') ORDER BY id;
-- => [(3, 0.025), (27, 0.033333335), (31, 0.1), (47, 0.05), (48, 0.025), (52, 0.02), (53, 0.05)]
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'quick <-> brown | lazy <2> dog')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'quick <-> brown | lazy <2> dog') ORDER BY id;
-- => [(67, 0.05)]
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', '(old <-> book) & !river')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', '(old <-> book) & !river') ORDER BY id;
-- => []
SELECT id, ts_rank_cd(to_tsvector('english', content), to_tsquery('english', 'new <-> (small <-> house)')) FROM documents WHERE to_tsvector('english', content) @@ to_tsquery('english', 'new <-> (small <-> house)') ORDER BY id;
-- => [(45, 0.1)]
SELECT to_tsvector('nosuch', 'x');
-- !! 42704
SELECT 'fat &'::tsquery;
-- !! 42601
SELECT 'a b'::tsquery;
-- !! 42601
SELECT to_tsquery('english', 'cats &');
-- !! 42601
SELECT to_tsquery('english', 'cats dogs');
-- !! 42601
SELECT plainto_tsquery('nosuch', 'x');
-- !! 42704
UPDATE documents SET content = 'changed' WHERE to_tsvector('english', content) @@ to_tsquery('english', '(cats');
-- !! 42601
SELECT count(*) FROM documents WHERE content = 'changed';
-- => [(0,)]
