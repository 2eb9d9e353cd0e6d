#ifndef WCL_VERSION_H
#define WCL_VERSION_H

#define WCL_VERSION "1.4.2"

#endif
