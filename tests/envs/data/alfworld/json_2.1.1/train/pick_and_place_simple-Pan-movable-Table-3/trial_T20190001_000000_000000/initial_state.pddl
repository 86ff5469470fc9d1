(define (problem pick_and_place_simple-pan-movable-table-3) (:domain alfred))
