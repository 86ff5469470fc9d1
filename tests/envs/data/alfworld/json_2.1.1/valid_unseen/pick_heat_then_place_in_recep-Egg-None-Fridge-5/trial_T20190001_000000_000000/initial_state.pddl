(define (problem pick_heat_then_place_in_recep-egg-none-fridge-5) (:domain alfred))
