SELECT b.art_key AS esra_k, ftr0.[RANK] + ftp0.[RANK] AS esra_s, b.art_title AS esra_c0, b.[Art Body] AS esra_c1, b.art_published AS esra_c2 
FROM contract_articles AS b JOIN CONTAINSTABLE(contract_articles, (art_title, [Art Body]), %(t0)s) AS ftr0 ON ftr0.[KEY] = b.art_key JOIN CONTAINSTABLE(contract_articles, (art_title, [Art Body]), %(tp0)s) AS ftp0 ON ftp0.[KEY] = b.art_key 
WHERE b.art_org = %(r0_0)s ORDER BY esra_s DESC, esra_k ASC
 OFFSET 0 ROWS
 FETCH FIRST %(lim)s ROWS ONLY
