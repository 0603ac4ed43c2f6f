"""What the HTTP API (``amcp.api``) and the web inspector (``amcp.ui``) share: who a bearer
token is and which scopes it may read or write (``access``), and how an ``AmcpError``
becomes an HTTP answer (``errors``). Below both, so neither imports the other's internals
(``amcp.api.http`` mounts the inspector; the inspector never imports the API)."""
