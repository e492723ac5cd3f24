SELECT b.art_key AS esra_k, 0 AS esra_s, b.art_title AS esra_c0, b.[Art Body] AS esra_c1, b.art_published AS esra_c2 
FROM contract_articles AS b 
WHERE b.art_org = %(r0_0)s ORDER BY b.art_published DESC, esra_s DESC, esra_k ASC
 OFFSET 0 ROWS
 FETCH FIRST %(lim)s ROWS ONLY
