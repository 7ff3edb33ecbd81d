#ifndef NAVIGATOR_CLIBPQ_SHIM_H
#define NAVIGATOR_CLIBPQ_SHIM_H

// libpq, PostgreSQL's own client library (Debian: libpq-dev), found where Debian puts it.
#include <postgresql/libpq-fe.h>

#endif
