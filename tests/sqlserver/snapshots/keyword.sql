SELECT b.art_key AS esra_k, ftr0.[RANK] + coalesce(fto.[RANK], 0) AS esra_s, b.art_title AS esra_c0, b.[Art Body] AS esra_c1, b.art_published AS esra_c2 
FROM contract_articles AS b JOIN CONTAINSTABLE(contract_articles, (art_title, [Art Body]), %(t0)s) AS ftr0 ON ftr0.[KEY] = b.art_key LEFT OUTER JOIN FREETEXTTABLE(contract_articles, (art_title, [Art Body]), %(q)s) AS fto ON fto.[KEY] = b.art_key 
WHERE NOT (EXISTS (SELECT 1 
FROM CONTAINSTABLE(contract_articles, (art_title, [Art Body]), %(tx0)s) AS ftx0 
WHERE ftx0.[KEY] = b.art_key)) AND b.art_category IN (%(f0_0)s, %(f0_1)s) AND b.art_year >= %(f1_0)s AND b.art_org = %(r0_0)s ORDER BY esra_s DESC, esra_k ASC
 OFFSET 0 ROWS
 FETCH FIRST %(lim)s ROWS ONLY
