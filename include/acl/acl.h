/*
 * hostccl: AscendCL entry header (host runtime subset).
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include <acl/acl_base.h>
#include <acl/acl_rt.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/** @brief Initialise the runtime. configPath may be NULL. A second call: ACL_ERROR_REPEAT_INITIALIZE. */
extern aclError aclInit(const char *configPath);

/** @brief Finalise the runtime: synchronises and destroys every stream. */
extern aclError aclFinalize(void);

/** @brief Runtime version. */
extern aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);

/** @brief The last error message logged on this thread ("" when none). */
extern const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_ACL_H_ */
