/*
 * Transport-neutral schedules and the engines built from them (DESIGN.md 5): the hierarchical
 * engine composes the intra-host engine over each host's ranks with schedules over TCP between
 * hosts.
 */
#ifndef HC_ALGO_H
#define HC_ALGO_H

#include "hc_engine.h"

/* Fits every communicator (the intra-host engine is tried first). */
extern const hc_engine_factory_t hc_hier_engine_factory;

#endif /* HC_ALGO_H */
