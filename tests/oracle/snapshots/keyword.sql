SELECT b.art_key AS esra_k, SCORE(1) AS esra_s, b.art_title AS esra_c0, b."Art Body" AS esra_c1, b.art_published AS esra_c2 
FROM contract_articles b 
WHERE CONTAINS(b.art_title, :q, 1) > 0 AND b.art_category IN (:f0_0, :f0_1) AND b.art_year >= :f1_0 AND b.art_org = :r0_0 ORDER BY SCORE(1) DESC, b.art_key ASC
 FETCH FIRST :lim ROWS ONLY
