SELECT b.art_key AS esra_k, CAST(0 AS INTEGER) AS esra_s, b.art_title AS esra_c0, b."Art Body" AS esra_c1, b.art_published AS esra_c2 
FROM contract_articles b 
WHERE b.art_org = :r0_0 ORDER BY b.art_published DESC, CAST(0 AS INTEGER) DESC, b.art_key ASC
 FETCH FIRST :lim ROWS ONLY
